"""The wall-time budget of an Action and its degradation ladder (spec §9–§10).

A budget of W seconds is split: the **reserve** is kept for writing the summary, the rest is for
search and verification. Spec §9: "reserve ~20% of wall time (>= 20 s)". The reserve is
``max(0.2 W, min(RESERVE_FLOOR_S, W / 2))``:

* W >= 100 s: 20% of W (which is at least 20 s);
* 40 s <= W < 100 s: the spec's floor, 20 s;
* W < 40 s: half of W. A 20 s floor cannot be kept in a wall that small without leaving no
  search at all; half keeps the floor's intent (a large, safe margin for the summary, which
  takes milliseconds here) and still lets the search run. The run says so in a notice.

Every search step, solver call, verifier and provider call is given what is left of the search
part (:meth:`Budget.search_remaining`), so the run ends within W plus one call's overshoot. When
the search part runs out the action goes **grace → freeze → partial**: the call in flight may
finish within a grace of 10% of the reserve, nothing new starts (freeze), and the run ends with
``action_partial`` and explicit caveats.

Pressure (the share of the search budget used) walks the **degradation ladder** of spec §10 in
its fixed order, each rung once, each recorded: shrink the beam, drop the soft clauses, reduce
external calls, return a conservative summary.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cda.contracts.deadline import CancelToken, Deadline, current_token

__all__ = ["LADDER", "RESERVE_FLOOR_S", "RESERVE_SHARE", "Budget", "Rung"]

RESERVE_SHARE = 0.2
"""Share of the wall kept for the summary (spec §9: ~20%)."""

RESERVE_FLOOR_S = 20.0
"""The spec's floor of the reserve (§9: >= 20 s), kept whenever the wall is at least twice it."""

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
    def reserve(self) -> float:
        """Seconds kept for the summary."""
        if self.wall is None:
            return 0.0
        return max(RESERVE_SHARE * self.wall, min(RESERVE_FLOOR_S, self.wall / 2))

    def floor_kept(self) -> bool:
        """Whether the reserve reaches the spec's 20 s floor (False for a wall under 40 s)."""
        return self.wall is None or self.reserve >= RESERVE_FLOOR_S

    @property
    def search_seconds(self) -> float | None:
        return None if self.wall is None else self.wall - self.reserve

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
