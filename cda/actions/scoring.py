"""Scores and confidence bands (docs/actions.md, "Scoring and bands").

``score = salience + posterior_support − penalties(violations) − uncertainty``, each term in
[0, 1]:

* **salience** — the share of the observed symptoms the hypothesis' assumed entities reach in
  Ken (0 when there is no Ken or no symptom: no evidence of relevance either way);
* **posterior support** — the hypothesis' posterior over the enumerated hypotheses;
* **penalties** — the weight of the soft clauses it violates over the total soft weight;
* **uncertainty** — the normalised entropy of the posterior (1 = the hypotheses are all equally
  likely, 0 = one holds all the mass), plus 0.25 when the enumeration was capped or cut short.

Confidence bands come from :data:`CALIBRATION` (``cda.contracts.abstain``, one table for the
whole project, documented in docs/actions.md):
a confidence maps to the band of the first row whose lower bound it reaches, and a band
``high`` also needs a *supported* status — a claim the solver could not settle is at most
``medium`` however probable it looks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cda.contracts.abstain import BAND_CEILING, CALIBRATION, Band, band_of

__all__ = ["BAND_CEILING", "Band", "CALIBRATION", "band_for", "normalised_entropy", "score"]


def band_for(confidence: float, status: str) -> Band:
    """The band of a confidence; ``high`` only for a supported claim.

    >>> band_for(0.9, "supported"), band_for(0.9, "inconclusive"), band_for(0.1, "refuted")
    ('high', 'medium', 'low')
    """
    band = band_of(confidence)
    if band == "high" and status != "supported":
        return "medium"
    return band


def normalised_entropy(probabilities: Sequence[float]) -> float:
    """Shannon entropy over log2(n), in [0, 1]; 0 for one or no outcome."""
    ps = [p for p in probabilities if p > 0]
    if len(probabilities) < 2 or not ps:
        return 0.0
    h = -sum(p * math.log2(p) for p in ps)
    return min(1.0, h / math.log2(len(probabilities)))


def score(salience: float, posterior_support: float, penalty: float, uncertainty: float) -> float:
    """The spec's sum, rounded so that equal inputs print equally on every platform.

    >>> score(0.5, 0.4, 0.1, 0.2)
    0.6
    """
    return round(salience + posterior_support - penalty - uncertainty, 9) + 0.0
