"""One wall-clock budget for a whole run, and the signal that it ran out.

It lives below every stage that spends time (the grounder in ``encodings``, the encoders, the
solver's backends, circuit probing), so each of them can check the same clock inside its own
loops: a budget is a promise about the whole run, and a loop that never looks at the clock
breaks it (the grounder took 41 s of a 1 s budget on a million instances before this).

Checking costs one ``time.monotonic()`` call (about 50 ns); loops check every few hundred
steps (:meth:`Deadline.tick`), so a check never shows on the normal path.
"""

from __future__ import annotations

import math
import time

from cda.errors import BudgetExceeded

__all__ = ["Deadline", "OutOfTime", "NO_DEADLINE"]


class OutOfTime(BudgetExceeded):
    """The deadline passed; ``where`` says where time ran out (``"while grounding (12,288 of at
    most 435,660 instances)"``), or is empty when the caller knows better. Callers turn it into
    a labelled partial result; it never reaches a user as a traceback.

    >>> str(OutOfTime("while grounding")), OutOfTime("time ran out while grounding").where
    ('time ran out while grounding', 'while grounding')
    """

    def __init__(self, where: str = "") -> None:
        if where.startswith("time ran out"):  # a whole message ("time ran out while grounding")
            where = where[len("time ran out"):].strip()
        super().__init__(f"time ran out {where}" if where else "time ran out")
        self.where = where


class Deadline:
    """A wall-clock budget shared by every call of one run; ``None`` (or +infinity) means no limit.

    >>> Deadline(None).remaining() is None, Deadline(0).expired()
    (True, True)
    """

    #: how many :meth:`tick` calls between two looks at the clock (a power of two)
    EVERY = 256

    def __init__(self, seconds: float | None) -> None:
        self.seconds = None if seconds is None or seconds == math.inf else seconds  # +infinity: no limit
        self._end = None if self.seconds is None else time.monotonic() + self.seconds
        self._ticks = 0

    def remaining(self) -> float | None:
        if self._end is None:
            return None
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        """Whether the budget has run out (never, without a limit)."""
        return self._end is not None and time.monotonic() >= self._end

    def tick(self) -> bool:
        """Count one step of a loop; every :attr:`EVERY` steps, whether the budget has run out.

        Cheap enough for the innermost loop of the grounder: no clock read on most calls.
        """
        if self._end is None:
            return False
        self._ticks += 1
        return not self._ticks & (self.EVERY - 1) and time.monotonic() >= self._end


#: the deadline of a run without a time limit
NO_DEADLINE = Deadline(None)
