"""Conflicts: when the hard clauses and observations cannot all hold, why, and how to repair it.

All minimal unsatisfiable subsets (cores) and minimal correction sets of the named clauses, by
MARCO (:func:`cda.solver.cores.marco`), at most ``limit`` of each; every question is "is this
subset of clauses satisfiable?", asked in source order, so both backends give the same sets.
"""

from __future__ import annotations

from collections.abc import Sequence

from cda.contracts.result import Conflict
from cda.solver.backend import Deadline, selector
from cda.solver.cores import marco
from cda.solver.recheck import CheckedBackend

__all__ = ["conflict"]


def conflict(solver: CheckedBackend, limit: int, deadline: Deadline) -> Conflict:
    """Cores and corrections; ``complete`` is false when ``limit`` or the deadline stopped MARCO."""
    names = [c.name for c in solver.problem.clauses]

    def oracle(subset: Sequence[str]) -> bool:
        on = set(subset)
        return solver.holds([(selector(n), n in on) for n in names], "conflict")

    def out_of_time() -> bool:
        left = deadline.remaining()
        return left is not None and left <= 0

    cores, corrections, complete = marco(names, oracle, limit, out_of_time)
    return Conflict(cores=cores, corrections=corrections, complete=complete)
