"""Posterior over hypotheses and the expected information gain of an observation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first batch of gains, not at start-up
    import numpy as np

__all__ = ["posterior", "entropy", "information_gain", "expected_gains", "rounded"]


def rounded(x: float) -> float:
    """A probability, cost or gain as reported: nine decimals, and never ``-0.0``.

    >>> rounded(1 / 3), rounded(-0.0)
    (0.333333333, 0.0)
    """
    return round(x, 9) + 0.0


def posterior(costs: Sequence[Fraction]) -> list[float]:
    """Weights exp(-cost), normalised; shifted by the least cost so nothing underflows.

    >>> [round(p, 3) for p in posterior([Fraction(0), Fraction(1)])]
    [0.731, 0.269]
    """
    if not costs:
        return []
    # few distinct costs: exact arithmetic once each. They are found by (numerator, denominator),
    # equal exactly for equal Fractions (lowest terms): a Fraction's own hash costs a modular inverse
    distinct = {(c.numerator, c.denominator): c for c in costs}
    low = min(distinct.values())
    weight = {key: math.exp(-float(c - low)) for key, c in distinct.items()}
    weights = [weight[c.numerator, c.denominator] for c in costs]
    total = math.fsum(weights)
    return [w / total for w in weights]


def entropy(probabilities: Sequence[float]) -> float:
    return -math.fsum(p * math.log2(p) for p in probabilities if p > 0)


def information_gain(prior: Sequence[float], likelihood_true: Sequence[float]) -> tuple[float, float]:
    """(expected information gain in bits, P(observation true)).

    ``likelihood_true[i]`` is P(observable true | hypothesis i): 1 or 0 when the hypothesis
    forces the value, 0.5 when it leaves it open.

    >>> information_gain([0.5, 0.5], [1.0, 0.0])
    (1.0, 0.5)
    """
    p_true = math.fsum(p * q for p, q in zip(prior, likelihood_true))
    before = entropy(prior)
    after = 0.0
    for p_outcome, lik in ((p_true, likelihood_true), (1 - p_true, [1 - q for q in likelihood_true])):
        if p_outcome <= 1e-15:
            continue
        post = [p * q / p_outcome for p, q in zip(prior, lik)]
        after += p_outcome * entropy(post)
    return max(0.0, before - after), p_true


def expected_gains(prior: Sequence[float], likelihood: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`information_gain` for many observables at once: the gain (bits) and P(value 1) of
    each column of ``likelihood``.

    ``likelihood[d, c]`` is P(probe c reads 1 | diagnosis d): 1, 0 or 1/2. With
    A = prior·L and B = prior·(1 − L), the expected entropy after the probe is
    Σ_outcome p_o·H(posterior_o) = −Σ A log A + p₁ log p₁ − Σ B log B + p₀ log p₀.

    >>> import numpy as np
    >>> gain, p1 = expected_gains([0.5, 0.5], np.array([[1.0, 0.5], [0.0, 0.5]]))
    >>> [round(float(g), 6) for g in gain], [round(float(p), 6) for p in p1]
    ([1.0, 0.0], [0.5, 0.5])
    """
    import numpy as np

    w = np.asarray(prior, dtype=float)[:, None]
    a = w * likelihood
    b = w * (1.0 - likelihood)

    def xlogx(x: np.ndarray) -> np.ndarray:
        safe = np.where(x > 0, x, 1.0)
        return np.where(x > 0, x * np.log2(safe), 0.0)

    p1, p0 = a.sum(axis=0), b.sum(axis=0)
    after = -xlogx(a).sum(axis=0) + xlogx(p1) - xlogx(b).sum(axis=0) + xlogx(p0)
    before = -float(xlogx(w[:, 0]).sum())
    return np.maximum(0.0, before - after), p1
