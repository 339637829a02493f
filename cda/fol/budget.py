"""The wall-clock budget inside FOL's own loops.

A timeout is a promise about wall-clock time, so it must hold before any solver is called:
expanding ``∀A…I R(A, …, I)`` over six elements builds ten million instances, and reading a
9-place relation off a model, or re-checking it, visits as many tuples. Every such loop calls
:func:`spend`, which raises the engine's out-of-time signal once the deadline has passed; the
prover turns it into an *inconclusive* answer whose reason says time ran out.
"""

from __future__ import annotations

from cda.contracts.deadline import Deadline, OutOfTime

__all__ = ["OutOfTime", "spend"]


def spend(deadline: Deadline | None, what: str) -> None:
    """Raise :data:`OutOfTime` ("time ran out while ``what``") once ``deadline`` has passed.

    >>> spend(Deadline(None), "waiting")
    >>> spend(Deadline(0), "grounding")
    Traceback (most recent call last):
    ...
    cda.contracts.deadline.OutOfTime: time ran out while grounding
    """
    if deadline is not None and deadline.expired():
        raise OutOfTime(f"time ran out while {what}")
