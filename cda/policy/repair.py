"""What to change when a property fails, and what a holding property stands on.

Both are questions about the lowered analysis (:func:`cda.policy.analyze.lower_analysis`), asked
through the same query: each policy's meaning is a named clause; a policy is *removed* by
switching its clause off and its satisfied and errors atoms to false.

**Repair.** For the properties a removal can restore, the policies whose removal moves toward
holding are the *removable* ones: the permits of the set under review (``always-denies S``,
``implies A B``: A's, ``disjoint A B``: A's, ``no-new-access OLD NEW``: NEW's), the forbids for
``always-allows``, any policy for ``never-errors``. The violation is then a disjunction over them,
each under the same rest (a request NEW allows and OLD denies is one some permit of NEW grants),
so the least set to remove is exactly the removable policies that take part in some violation:
each model of the violation names those that *fire* in it (satisfied, or erring for
``never-errors``); asking again for a violation in which one not yet named fires finds the rest,
one model per question, until none is left. The suggestion is re-checked (the property asked
again with them removed) before it is shown; when removing them does not restore the property
(no permit covers some request, for ``always-allows``), it says so. ``equivalent`` is not
monotone in any removal: it names the direction that fails instead.

**One condition.** A smaller change than a removal, where one exists: a single ``when``/``unless``
condition dropped, or negated (``when`` ↔ ``unless``), after which the property holds with every
other policy as written. The conditions were lowered once (:class:`~cda.policy.lower.PolicyParts`),
so an edit is the policy's parts recombined; each edit that the query says restores the property
is then re-checked independently, by analysing the edited policy text from scratch (a fresh
lowering), before it is shown. The policies of the removal come first; at most
:data:`MAX_CONDITION_EDITS` edits are tried and :data:`MAX_CONDITION_REPAIRS` shown.

**Explain.** For a holding property, a minimal set of policies whose meaning alone rules out
every violation (QuickXplain over the policy clauses, the others switched off): the policies it
stands on, the same on both backends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cda.errors import EvaluatorDisagreement
from cda.policy.solving import Node, OutOfTime, Query, SolverStatus, evaluate
from cda.policy.syntax import Policy

if TYPE_CHECKING:
    from cda.policy.analyze import Lowered

__all__ = ["MAX_CONDITION_EDITS", "MAX_CONDITION_REPAIRS", "condition_repairs", "edited", "suggest", "stands_on"]

#: the most single-condition edits a repair asks the solver about (two per condition)
MAX_CONDITION_EDITS = 40
#: the most single-condition repairs shown (each re-checked by a fresh analysis)
MAX_CONDITION_REPAIRS = 3

#: re-analyses the policy sets with one policy replaced (clause name → the edited policy): True
#: when the property then holds
Recheck = Callable[[str, Policy], bool]


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


def _fires(prop: str, lowered: Lowered, name: str) -> Node:
    for pols in lowered.policies:
        for n, _, sat, err in pols:
            if n == name:
                return err if prop == "never-errors" else sat
    raise KeyError(name)


def suggest(prop: str, lowered: Lowered, query: Query, recheck: Recheck | None = None) -> dict[str, Any]:
    """The least set of removable policies whose removal makes ``prop`` hold, re-checked; and,
    with ``recheck``, the single-condition edits that make it hold (:func:`condition_repairs`)."""
    out = _removal(prop, lowered, query)
    if recheck is not None:
        first = [p["policy"] for p in out["remove"]]
        out["conditions"], note = condition_repairs(lowered, query, recheck, first)
        if note:
            out["note"] += f"; {note}"
    return out


def edited(p: Policy, index: int, change: str) -> Policy:
    """Policy ``p`` with its condition ``index`` (0-based) dropped or negated (``when`` ↔ ``unless``)."""
    conds = list(p.conditions)
    kind, cond = conds[index]
    if change == "drop":
        del conds[index]
    else:
        conds[index] = ("unless" if kind == "when" else "when", cond)
    return replace(p, conditions=tuple(conds))


def condition_repairs(lowered: Lowered, query: Query, recheck: Recheck,
                      first: Sequence[str] = ()) -> tuple[list[dict[str, Any]], str]:  # fmt: skip
    """The single-condition edits (module docstring) after which the property holds, each
    re-checked by ``recheck`` (a fresh analysis of the edited policy); the policies named in
    ``first`` are tried first. Returns the edits and a note (what was not tried, or why)."""
    low = lowered.low
    f = low.f
    everything = [c.name for c in lowered.problem.clauses]
    pols = [entry for per_set in lowered.policies for entry in per_set]
    pols.sort(key=lambda e: list(first).index(e[0]) if e[0] in first else len(first))  # stable: the rest in order
    found: list[dict[str, Any]] = []
    tried = 0
    try:
        for name, p, s_atom, e_atom in pols:
            parts = low.parts.get(id(p))
            if parts is None or not parts.complete:
                continue  # a scope or condition that never holds: the rest was not lowered
            for i, (kind, cond) in enumerate(p.conditions):
                for change in ("drop", "negate"):
                    if tried == MAX_CONDITION_EDITS or len(found) == MAX_CONDITION_REPAIRS:
                        return found, _capped(tried, found)
                    tried += 1
                    conds = [(k, b, bad) for (k, _), (b, bad) in zip(p.conditions, parts.conditions)]
                    if change == "drop":
                        del conds[i]
                    else:
                        conds[i] = ("unless" if kind == "when" else "when", conds[i][1], conds[i][2])
                    ok, err = low.combine(parts.scope, conds)
                    sel = query.add(f.and_([f.iff(s_atom, ok), f.iff(e_atom, err)]))
                    answer = query.check([c for c in everything if c != name], also=[sel])
                    if answer.status is SolverStatus.UNKNOWN:
                        return found, "time ran out while trying single-condition repairs"
                    if answer.status is not SolverStatus.UNSAT:
                        continue
                    if not recheck(name, edited(p, i, change)):
                        raise EvaluatorDisagreement(
                            f"{change} condition {i + 1} of {name}: the recombined policy restores the property, a "
                            "fresh analysis of the edited policy does not"
                        )
                    where = _where(lowered, name)
                    found.append({**where, "condition": i + 1, "kind": kind, "change": change,
                                  "line": cond.pos[0], "column": cond.pos[1]})  # fmt: skip
    except OutOfTime:
        return found, "time ran out while trying single-condition repairs"
    return found, ""


def _capped(tried: int, found: list[dict[str, Any]]) -> str:
    if len(found) == MAX_CONDITION_REPAIRS:
        return ""
    return f"single-condition repairs: the first {tried} edits tried"


def _removal(prop: str, lowered: Lowered, query: Query) -> dict[str, Any]:
    """The least set of removable policies whose removal makes ``prop`` hold, re-checked."""
    f = lowered.low.f
    found = _removable(prop, lowered)
    if found is None:
        return {"remove": [], "restores": False,
                "note": "equivalence is not restored by removing policies in general: see which of implies A B and "
                        "implies B A fails (the answers above say which set allows the request)"}  # fmt: skip
    pool, kind = found
    fires = {name: _fires(prop, lowered, name) for name in pool}
    chosen: list[str] = []
    left = list(pool)
    try:
        while left:
            some = query.add(f.or_(fires[n] for n in left))
            answer = query.check(also=[some])
            if answer.status is SolverStatus.UNKNOWN:
                return {"remove": [], "restores": False, "note": "time ran out while looking for a repair"}
            if answer.status is SolverStatus.UNSAT:
                break
            assert answer.model is not None
            named = [n for n in left if evaluate(fires[n], answer.model)]
            chosen += named
            left = [n for n in left if n not in named]
        everything = [c.name for c in lowered.problem.clauses]
        removed = query.add(f.and_(f.not_(atom) for pols in lowered.policies for n, _, sat, err in pols
                                   if n in chosen for atom in (sat, err)))  # fmt: skip
        rechecked = query.check([c for c in everything if c not in chosen], also=[removed]).status
    except OutOfTime:
        return {"remove": [], "restores": False, "note": "time ran out while looking for a repair"}
    chosen.sort(key=pool.index)
    if rechecked is SolverStatus.UNKNOWN:
        return {"remove": [], "restores": False, "note": "time ran out while re-checking the repair"}
    if rechecked is SolverStatus.SAT:
        return {"remove": [], "restores": False, "note": f"removing {kind} does not restore it"}
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
