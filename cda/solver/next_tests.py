"""Next-best tests: which unobserved observable would best tell the hypotheses apart.

For every observable no observation mentions, the expected information gain (bits) of
observing it and the probability it reads true, over the most probable hypotheses (at most
``limit``; the engine notes when there were more), where P(o | h) is 1 or 0 when hypothesis h
forces o and ½ when it leaves o open. Sorted by gain, then name.
"""

from __future__ import annotations

import math

from cda.contracts.result import NextTest
from cda.solver.backbone import forced
from cda.solver.hypotheses import Ranking
from cda.solver.information import information_gain, rounded
from cda.solver.recheck import CheckedBackend

__all__ = ["next_tests"]


def next_tests(solver: CheckedBackend, ranking: Ranking, limit: int) -> tuple[list[NextTest], int]:
    """The tests, best first, and how many hypotheses they were computed over."""
    problem = solver.problem
    candidates = [o for o in problem.observable_atoms if o not in problem.observed]
    if not candidates or not ranking.hypotheses:
        return [], len(ranking)
    considered = ranking.hypotheses[:limit]
    weights = ranking.posteriors[: len(considered)]
    total = math.fsum(weights)
    prior = [w / total for w in weights]
    fixed = [forced(solver, solver.base + h.lits(solver.hyps), h.model, candidates) for h in considered]
    tests = []
    for obs in candidates:
        # P(obs | hypothesis): its value when every model of the hypothesis agrees, else 1/2
        lik = [(1.0 if h.model[obs] else 0.0) if obs in known else 0.5 for h, known in zip(considered, fixed)]
        gain, p_true = information_gain(prior, lik)
        tests.append(NextTest(observable=obs, expected_information_gain=rounded(gain), probability_true=rounded(p_true)))
    tests.sort(key=lambda t: (-t.expected_information_gain, t.observable))
    return tests, len(considered)
