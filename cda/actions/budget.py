"""The wall-time budget of an Action, its degradation ladder, and the reserve of an escalation
(docs/actions.md, "Budgets and the degradation ladder"; docs/service.md, "CUP escalation").

**The reserve**: the spec's line "Budget reservation: CDA should reserve ~20% of wall time
(>= 20 s) upon escalation; if less remains, emit partial with explicit caveats". The line is about
escalation: when a caller (CUP) hands a decision to CDA with ``remaining`` seconds of its own
wall left, CDA takes :func:`reserve` of them, ``max(0.2 * remaining, 20 s)``, as the action's
wall; when less than that remains (under 20 s), the action is a terminal partial at once, with
the caveat saying why (:mod:`cda.service.escalation`). QA scenario 4 says the same from the
other side: "CDA reserves 20%; if consumed, emits terminal partial". This is the one rule for
that line: the action's budget used to read it a second time, as a share of its own wall kept
back for writing the summary (``max(0.2 W, min(20 s, W / 2))``: 60 s of a 300 s wall idle, for
a summary written in milliseconds).

**The action's wall** W (``budgets.wall``, or what an escalation reserved) is the run's:
everything but a small **finishing margin**, ``min(5 s, W / 2)`` (:data:`FINISH_MARGIN_S`), is
for search and verification. The margin is where the run writes its summary, bundles and
receipts after the search stopped; half of a small wall keeps room for that under load.
Every search step, solver call, verifier and provider call is given what is left of the search
part (:meth:`Budget.search_remaining`), so the run ends within W plus one call's overshoot.
When the search part runs out the action goes **grace → freeze → partial** (spec §9): the call
in flight ends at its own deadline, nothing new starts (freeze), and the run ends with
``action_partial`` and explicit caveats.

Pressure (the share of the search budget used) walks the **degradation ladder** (docs/actions.md) in
its fixed order, each rung once, each recorded: shrink the beam, drop the soft clauses, reduce
external calls, return a conservative summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cda.contracts.deadline import CancelToken, Deadline, current_token

__all__ = ["FINISH_MARGIN_S", "LADDER", "RESERVE_FLOOR_S", "RESERVE_SHARE", "Budget", "Rung", "reserve"]

RESERVE_SHARE = 0.2
"""Spec §9: the share of a caller's remaining wall time CDA reserves when it is escalated to (~20%)."""

RESERVE_FLOOR_S = 20.0
"""Spec §9: the least CDA reserves (>= 20 s); a caller with less left gets a partial at once."""

FINISH_MARGIN_S = 5.0
"""The most of an action's wall kept back for writing its summary after the search (half of a wall under 10 s)."""


def reserve(remaining: float) -> float:
    """Spec §9's reserve: the wall time CDA takes from a caller that escalates with ``remaining``
    seconds left, ``max(0.2 * remaining, 20 s)``. More than ``remaining`` (under 20 s left) means
    too little time: the action is a terminal partial at once.

    >>> reserve(300), reserve(100), reserve(50), reserve(12) > 12
    (60.0, 20.0, 20.0, True)
    """
    return max(RESERVE_SHARE * remaining, RESERVE_FLOOR_S)


Rung = str
#: (rung, the pressure at which it is applied), in the spec's order.
LADDER: tuple[tuple[Rung, float], ...] = (
    ("shrink_beam", 0.5),
    ("drop_soft_clauses", 0.7),
    ("reduce_external_calls", 0.85),
    ("conservative_summary", 1.0),
)

LADDER_TEXT = {
    "shrink_beam": "search budget over half spent: beam halved",
    "drop_soft_clauses": "search budget 70% spent: soft clauses dropped (hypotheses unranked by preference)",
    "reduce_external_calls": "search budget 85% spent: LLM and function checks skipped",
    "conservative_summary": "search budget spent: conservative summary, no claim above medium confidence",
}


@dataclass
class Budget:
    """Wall time for one action; ``wall=None`` means unbounded (no ladder, never partial unless
    cancelled). ``token``: the run's cancel token (default: the ambient one,
    :func:`~cda.contracts.deadline.cancel_scope`); once it is cancelled the search is frozen at
    once, as if its budget were spent, and the run ends with what it found."""

    wall: float | None
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=0.0)
    applied: list[Rung] = field(default_factory=list)
    token: CancelToken | None = None

    def __post_init__(self) -> None:
        self.start = self.clock()
        if self.token is None:
            self.token = current_token()

    def cancelled(self) -> bool:
        return self.token is not None and self.token.cancelled

    def why(self) -> str:
        """Who stopped the run (the token's reason), or that its budget ran out."""
        if self.token is not None and self.token.reason is not None:
            return self.token.reason
        return "time budget exhausted"

    def stopped(self) -> str | None:
        """``"cancelled"`` or ``"interrupted"`` when a client or the server stopped the run (not a
        budget: a wall cap cancels with kind ``"timeout"``, which is an ordinary partial)."""
        kind = self.token.kind if self.token is not None and self.token.cancelled else None
        return kind if kind in ("cancelled", "interrupted") else None

    def deadline(self) -> Deadline:
        """A deadline for what is left of the search, cancelled with the run's token."""
        return Deadline(self.search_remaining(), self.token)

    @property
    def margin(self) -> float:
        """Seconds kept back for writing the summary, ``min(5 s, W / 2)`` (see the module's docstring).

        >>> Budget(300).margin, Budget(10).margin, Budget(1).margin, Budget(None).margin
        (5.0, 5.0, 0.5, 0.0)
        """
        if self.wall is None:
            return 0.0
        return min(FINISH_MARGIN_S, self.wall / 2)

    @property
    def search_seconds(self) -> float | None:
        return None if self.wall is None else self.wall - self.margin

    def elapsed(self) -> float:
        return self.clock() - self.start

    def search_remaining(self) -> float | None:
        """Seconds left for search and verification (0 when frozen or cancelled); None when unbounded."""
        if self.cancelled():
            return 0.0
        if self.search_seconds is None:
            return None
        return max(0.0, self.search_seconds - self.elapsed())

    def pressure(self) -> float:
        """Share of the search budget used, 0 when unbounded (a cancel is no pressure: nothing is degraded)."""
        if self.search_seconds is None:
            return 0.0
        if self.search_seconds <= 0:
            return 1.0
        return min(1.0, self.elapsed() / self.search_seconds)

    def frozen(self) -> bool:
        """True once the search budget is spent: start nothing new."""
        remaining = self.search_remaining()
        return remaining is not None and remaining <= 0.0

    def step_ladder(self) -> list[Rung]:
        """Apply, in order, every rung the current pressure has reached; returns the new ones."""
        if self.wall is None:
            return []
        level = self.pressure()
        new: list[Rung] = []
        for rung, threshold in LADDER:
            if rung in self.applied:
                continue
            if level < threshold:
                break
            self.applied.append(rung)
            new.append(rung)
        return new

    def has(self, rung: Rung) -> bool:
        return rung in self.applied
