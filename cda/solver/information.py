"""Posterior over hypotheses and the expected information gain of an observation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["posterior", "entropy", "information_gain"]


def posterior(costs: Sequence[Fraction]) -> list[float]:
    """Weights exp(-cost), normalised; shifted by the least cost so nothing underflows.

    >>> [round(p, 3) for p in posterior([Fraction(0), Fraction(1)])]
    [0.731, 0.269]
    """
    if not costs:
        return []
    low = min(costs)
    weights = [math.exp(-float(c - low)) for c in costs]
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
