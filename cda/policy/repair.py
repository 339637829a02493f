"""What to change when a property fails, and what a holding property stands on.

Both are questions about the lowered analysis (:func:`cda.policy.analyze.lower_analysis`),
asked through the same query: each policy's meaning is a named clause, and a *drop* clause
removes the policy instead (its satisfied and errors atoms false, its meaning switched off).

**Repair.** For the properties a removal can restore, the policies whose removal moves toward
holding are the *removable* ones: the permits of the set under review (``always-denies S``,
``implies A B``: A's, ``disjoint A B``: A's, ``no-new-access OLD NEW``: NEW's), the forbids for
``always-allows``, any policy for ``never-errors``. The violation is then a disjunction over
them (a request NEW allows is allowed by one of NEW's permits), so the least set to remove is
exactly the removable policies that can take part in a violation on their own: one question
each, with the other removable policies removed. The suggestion is re-checked (the property
asked again with them removed) before it is shown; when removing every removable policy does
not restore the property (a forbid that denies every request blocks ``always-allows`` whatever
else is removed), it says so. ``equivalent`` is not monotone in any removal: it names the
direction that fails instead.

**Explain.** For a holding property, a minimal set of policies whose meaning alone rules out
every violation (QuickXplain over the policy clauses, the others switched off): the policies it
stands on, the same on both backends.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cda.policy.solving import OutOfTime, Query, SolverStatus

if TYPE_CHECKING:
    from cda.policy.analyze import Lowered

__all__ = ["suggest", "stands_on"]


def _removable(prop: str, lowered: Lowered) -> tuple[list[str], str] | None:
    sets = lowered.policies

    def of(i: int, effect: str | None) -> list[str]:
        return [name for name, p, _, _ in sets[i] if effect is None or p.effect == effect]

    if prop == "always-allows":
        return of(0, "forbid"), "forbid policies"
    if prop == "always-denies":
        return of(0, "permit"), "permit policies"
    if prop == "never-errors":
        return of(0, None), "policies"
    if prop in ("implies", "disjoint"):
        return of(0, "permit"), "permit policies of A"
    if prop == "no-new-access":
        return of(1, "permit"), "permit policies of NEW"
    return None


def _where(lowered: Lowered, name: str) -> dict[str, Any]:
    for pols in lowered.policies:
        for n, p, _, _ in pols:
            if n == name:
                # the file's name, not its path: the same answer on every door (a job names files
                # relative to its manifest, the CLI as typed)
                return {"policy": n, "id": p.id, "effect": p.effect, "file": Path(p.filename).name, "line": p.pos[0]}
    raise KeyError(name)


def suggest(prop: str, lowered: Lowered, query: Query) -> dict[str, Any]:
    """The least set of removable policies whose removal makes ``prop`` hold, re-checked."""
    everything = [c.name for c in lowered.problem.clauses if not c.name.startswith("drop:")]
    found = _removable(prop, lowered)
    if found is None:
        return {"remove": [], "restores": False,
                "note": "equivalence is not restored by removing policies in general: see which of implies A B and "
                        "implies B A fails (the answers above say which set allows the request)"}  # fmt: skip
    pool, kind = found

    def without(removed: list[str]) -> SolverStatus:
        on = [c for c in everything if c not in removed] + [lowered.drops[c] for c in removed]
        return query.check(on).status

    try:
        if not pool or without(pool) is not SolverStatus.UNSAT:
            return {"remove": [], "restores": False, "note": f"removing every one of the {kind} does not restore it"}
        chosen = []
        for name in pool:
            status = without([p for p in pool if p != name])
            if status is SolverStatus.UNKNOWN:
                return {"remove": [], "restores": False, "note": "time ran out while looking for a repair"}
            if status is SolverStatus.SAT:
                chosen.append(name)
        rechecked = without(chosen)
    except OutOfTime:
        return {"remove": [], "restores": False, "note": "time ran out while looking for a repair"}
    if rechecked is not SolverStatus.UNSAT:
        return {"remove": [], "restores": False, "note": "time ran out while re-checking the repair"}
    return {"remove": [_where(lowered, n) for n in chosen], "restores": True,
            "note": f"the property holds once these {kind} are removed (or strengthened so they no longer grant the "
                    "counterexample's requests); re-checked"}  # fmt: skip


def stands_on(lowered: Lowered, query: Query) -> tuple[list[str] | None, str]:
    """The policies a holding property stands on (a minimal core), or ``None`` and why not."""
    names = [n for pols in lowered.policies for n, _, _, _ in pols]
    try:
        core = query.core(names, keep=[lowered.violation])
    except OutOfTime:
        return None, "time ran out while finding the policies the property stands on"
    if core is None:  # cannot happen for a property that holds: the core of everything exists
        return None, "no core found"
    return core, ""
