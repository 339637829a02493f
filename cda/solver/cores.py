"""Minimal unsatisfiable subsets and minimal correction sets, independent of the backend.

Both algorithms talk to a backend only through "is this subset of clauses satisfiable?",
and visit clauses in source order, so their answers are the same on every backend:
QuickXplain returns the same minimal core for the same order, and MARCO's full enumeration
is a canonical set that we sort.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["quickxplain", "marco"]

SatOracle = Callable[[Sequence[str]], bool]  # True when the subset (plus fixed context) is satisfiable


def quickxplain(clauses: Sequence[str], is_sat: SatOracle) -> list[str] | None:
    """A minimal subset of ``clauses`` that is unsatisfiable, preferring early clauses.

    Returns None when all of ``clauses`` together are satisfiable.

    >>> bad = {frozenset({"a", "c"})}
    >>> quickxplain(["a", "b", "c"], lambda s: not any(b <= set(s) for b in bad))
    ['a', 'c']
    """
    if is_sat(list(clauses)):
        return None
    if not is_sat([]):
        return []
    found = set(_qx(is_sat, [], False, list(clauses)))
    return [c for c in clauses if c in found]


def _qx(is_sat: SatOracle, background: list[str], delta: bool, candidates: list[str]) -> list[str]:
    """QuickXplain's recursion. A function of the module, not a closure in :func:`quickxplain`:
    a closure that calls itself refers to itself through its own cell, a cycle that kept
    ``is_sat`` (and the solver behind it, a z3 context of megabytes) alive until the cyclic
    collector ran, and z3's memory cap counts every live context (docs/architecture.md, "Freeing
    solvers")."""
    if delta and not is_sat(background):
        return []
    if len(candidates) == 1:
        return candidates
    half = len(candidates) // 2
    c1, c2 = candidates[:half], candidates[half:]
    d2 = _qx(is_sat, background + c1, bool(c1), c2)
    d1 = _qx(is_sat, background + d2, bool(d2), c1)
    return d1 + d2


def marco(
    clauses: Sequence[str], is_sat: SatOracle, limit: int = 64, should_stop: Callable[[], bool] = lambda: False
) -> tuple[list[list[str]], list[list[str]], bool]:
    """All minimal unsatisfiable subsets and minimal correction sets (MARCO), up to ``limit`` each.

    Returns ``(muses, mcses, complete)`` with every list in source order and the lists sorted
    by size then position.

    >>> muses, mcses, done = marco(["a", "na", "b"], lambda s: not {"a", "na"} <= set(s))
    >>> muses, mcses, done
    ([['a', 'na']], [['a'], ['na']], True)
    """
    order = {c: i for i, c in enumerate(clauses)}
    import z3  # here, not at the top: only MARCO's map solver needs it, and a clingo answer need not load z3

    z3.set_param("ctrl_c", False)  # Ctrl-C reaches the command (cda.cli.interrupts), not swallowed by a check

    ctx = z3.Context()
    map_solver = z3.Solver(ctx=ctx)
    var = {c: z3.Bool(f"m{i}", ctx) for i, c in enumerate(clauses)}
    clause_of = {f"m{i}": c for i, c in enumerate(clauses)}
    muses: list[list[str]] = []
    mcses: list[list[str]] = []
    complete = True
    while True:
        if len(muses) >= limit or len(mcses) >= limit or should_stop():
            complete = False
            break
        if map_solver.check() != z3.sat:
            break
        m = map_solver.model()
        # seeds start from everything the map allows: grow toward large satisfiable sets. The
        # map's model assigns only the clauses its blocking constraints mention: read those
        # (reading every clause's value was most of the time on 10,000 clauses)
        excluded = {clause_of[d.name()] for d in m.decls() if z3.is_false(m[d])}
        seed = [c for c in clauses if c not in excluded]
        if is_sat(seed):
            mss = list(seed)
            in_mss = set(mss)
            for c in clauses:
                if c not in in_mss and is_sat(mss + [c]):
                    mss.append(c)
                    in_mss.add(c)
            mcs = [c for c in clauses if c not in in_mss]
            mcses.append(mcs)
            map_solver.add(z3.Or([var[c] for c in mcs]) if mcs else z3.BoolVal(False, ctx))
        else:
            mus = quickxplain(sorted(seed, key=order.__getitem__), is_sat) or []
            muses.append(mus)
            map_solver.add(z3.Or([z3.Not(var[c]) for c in mus]) if mus else z3.BoolVal(False, ctx))

    def canon(sets: list[list[str]]) -> list[list[str]]:
        ordered = [sorted(s, key=order.__getitem__) for s in sets]
        return sorted(ordered, key=lambda s: (len(s), [order[c] for c in s]))

    return canon(muses), canon(mcses), complete
