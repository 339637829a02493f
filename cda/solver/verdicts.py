"""Verdicts: the answer to each ``prove``/``disprove`` goal, with its confidence and witnesses.

For hard clauses and observations H and a claim c: *supported* (for ``prove``) when H ∧ ¬c is
unsatisfiable, *refuted* when H ∧ c is, with a minimal set of clauses that forces the answer
(QuickXplain in source order); *inconclusive* otherwise, with a witness hypothesis each way (the
most probable one under which the goal can hold, and the most probable one under which it can
fail: for ``disprove c``, c fails and holds under them)
and a confidence: the posterior probability that the goal holds, where P(c | h) is 1 or 0 when
hypothesis h forces c and ½ when h leaves it open, summed over **every** hypothesis enumerated
(not a prefix of them; a confidence over a capped enumeration says so in its reason).
A claim left undecided (the budget ran out, a cancel, a solver's unknown) is *unknown*, with no
confidence and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from cda.contracts.result import Verdict, Witness
from cda.contracts.status import SolverStatus, VerdictStatus
from cda.encodings.ir import Claim
from cda.errors import EvaluatorDisagreement
from cda.solver.backend import _OutOfTime, claim_key, selector
from cda.solver.cores import quickxplain
from cda.solver.hypotheses import RankedHypothesis, Ranking
from cda.solver.information import rounded
from cda.solver.recheck import CheckedBackend

__all__ = ["verdict", "undecided", "in_conflict"]


def verdict(solver: CheckedBackend, claim: Claim, ranking: Ranking) -> Verdict:
    """The verdict on ``claim``, its confidence over every hypothesis in ``ranking``."""
    key = claim_key(claim.name)
    can_true = solver.status([*solver.base, (key, True)], f"claim {claim.name} true")
    can_false = solver.status([*solver.base, (key, False)], f"claim {claim.name} false")
    if SolverStatus.UNKNOWN in (can_true, can_false):
        return undecided(claim, "the solver could not decide in time (unknown)")
    goal_holds_when = claim.mode == "prove"  # the claim's value that makes the goal hold
    if SolverStatus.UNSAT in (can_true, can_false):
        claim_value = can_false is SolverStatus.UNSAT  # True when the claim is entailed
        status = VerdictStatus.settled(claim_value == goal_holds_when)
        return Verdict(
            name=claim.name, goal=claim.mode, claim=claim.text, status=status,
            confidence=1.0 if status is VerdictStatus.SUPPORTED else 0.0,
            justification=_core(solver, key, not claim_value), witnesses=[],
            reason=("entailed" if claim_value else "contradicted") + " by the hard clauses and observations",
        )
    can_hold, can_fail = _consistent(solver, claim, ranking)
    # a witness is relative to the goal, as status and confidence are: for ``disprove c`` the goal
    # holds where c fails; the goal's holding witness first
    goal_true, goal_false = (can_hold, can_fail) if goal_holds_when else (can_fail, can_hold)
    witnesses = [
        Witness(holds=side, assumed=sorted(first.assumed))
        for side, possible in ((True, goal_true), (False, goal_false))
        for first in _first(ranking.hypotheses, possible)
    ]
    # P(c | h): 1 when h forces c, 0 when it forces not c, 1/2 when it leaves c open
    likelihood = [
        0.5 if h.assumed in can_hold and h.assumed in can_fail else 1.0 if h.assumed in can_hold else 0.0
        for h in ranking.hypotheses
    ]
    total = math.fsum(ranking.posteriors)
    p_true = math.fsum(w * q for w, q in zip(ranking.posteriors, likelihood)) / total if total > 0 else 0.0
    reason = "consistent with the claim and with its negation"
    if not ranking.complete:
        reason += f"; confidence over the {len(ranking)} hypotheses enumerated, not all of them"
    return Verdict(
        name=claim.name, goal=claim.mode, claim=claim.text, status=VerdictStatus.INCONCLUSIVE,
        confidence=rounded(p_true if goal_holds_when else 1 - p_true), justification=[], witnesses=witnesses,
        reason=reason,
    )


def undecided(claim: Claim, reason: str) -> Verdict:
    """*unknown* for want of an answer (a time budget, a cancel, a solver's unknown): no
    confidence, since none was computed, and ``reason`` says why (docs/dsl.md, "Verdicts")."""
    return Verdict(
        name=claim.name, goal=claim.mode, claim=claim.text, status=VerdictStatus.UNKNOWN, confidence=None,
        justification=[], witnesses=[], reason=reason,
    )


def in_conflict(claim: Claim) -> Verdict:
    """Inconclusive because the hard clauses and observations cannot all hold (see the conflict)."""
    return Verdict(
        name=claim.name, goal=claim.mode, claim=claim.text, status=VerdictStatus.INCONCLUSIVE, confidence=0.0,
        justification=[], witnesses=[], reason="the hard clauses and observations conflict; see conflict",
    )


def _first(hypotheses: Sequence[RankedHypothesis], among: set[frozenset[str]]) -> list[RankedHypothesis]:
    """The most probable hypothesis in ``among``, as a list of one (none when there is none)."""
    return next(([h] for h in hypotheses if h.assumed in among), [])


def _core(solver: CheckedBackend, key: str, value: bool) -> list[str]:
    """A minimal set of named clauses under which the claim cannot take ``value``."""
    names = [c.name for c in solver.problem.clauses]

    def oracle(subset: Sequence[str]) -> bool:
        on = set(subset)
        return solver.holds([(selector(n), n in on) for n in names] + [(key, value)], "core")

    return quickxplain(names, oracle) or []


def _consistent(solver: CheckedBackend, claim: Claim, ranking: Ranking) -> tuple[set[frozenset[str]], set[frozenset[str]]]:
    """The hypotheses of ``ranking`` under which the claim can hold, and those under which it
    can fail: one enumeration projected on the abducibles per side, each model re-checked (its
    clauses and its claim value). A hypothesis an enumeration could not reach (it was capped,
    only when the ranking itself is) is asked on its own."""
    key = claim_key(claim.name)
    wanted = {h.assumed for h in ranking.hypotheses}
    sides: list[set[frozenset[str]]] = []
    for side in (True, False):
        lits = [*solver.base, (key, side)]
        enum = solver.enumerate(solver.hyps, lits, len(ranking) + 1)
        if enum.timed_out:
            raise _OutOfTime()
        solver.verify_all(enum.models, f"claim {claim.name} {str(side).lower()}", claim.node, side)
        found = {frozenset(a for a in solver.hyps if m[a]) for m in enum.models} & wanted
        if not enum.complete:
            for h in ranking.hypotheses:
                if h.assumed not in found and solver.holds([*lits, *h.lits(solver.hyps)], "witness"):
                    found.add(h.assumed)
        sides.append(found)
    can_hold, can_fail = sides
    lost = wanted - can_hold - can_fail
    if lost:
        raise EvaluatorDisagreement(
            f"{solver.name}: hypothesis {sorted(min(lost, key=sorted))} has a model, yet none with the claim "
            f"{claim.name} true or false"
        )
    return can_hold, can_fail
