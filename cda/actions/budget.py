"""The wall-time budget of an Action and its degradation ladder (spec §9–§10).

A budget of W seconds is split: 80% for search and verification, 20% reserved for writing the
summary (at least :data:`MIN_SUMMARY_RESERVE` seconds, or all of W when W is smaller). When
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

__all__ = ["LADDER", "MIN_SUMMARY_RESERVE", "Budget", "Rung"]

MIN_SUMMARY_RESERVE = 0.2  # seconds: measured time to write the artifacts of a small run, doubled

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
    """Wall time for one action; ``wall=None`` means unbounded (no ladder, never partial)."""

    wall: float | None
    clock: Callable[[], float] = time.monotonic
    start: float = field(default=0.0)
    applied: list[Rung] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.start = self.clock()

    @property
    def reserve(self) -> float:
        """Seconds kept for the summary."""
        if self.wall is None:
            return 0.0
        return min(self.wall, max(0.2 * self.wall, MIN_SUMMARY_RESERVE))

    @property
    def search_seconds(self) -> float | None:
        return None if self.wall is None else self.wall - self.reserve

    def elapsed(self) -> float:
        return self.clock() - self.start

    def search_remaining(self) -> float | None:
        """Seconds left for search and verification (0 when frozen); None when unbounded."""
        if self.search_seconds is None:
            return None
        return max(0.0, self.search_seconds - self.elapsed())

    def pressure(self) -> float:
        """Share of the search budget used, 0 when unbounded."""
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
