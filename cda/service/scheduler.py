"""Which action may run now: a fixed number of slots, handed out by stage, then by arrival.

The service measures itself by TTFS, the time from ``actions.start`` to the action's *draft*
boundary summary (spec §10; the runner's first ``boundary_summary`` checkpoint with
``draft: true``, after its first solver round). An action costs about three times as much CPU
after its draft (verifiers, bundles, the audit re-read) as before it. Run in arrival order, the
200th action of a burst waits for 199 whole actions before its first round; run by stage, it
waits only for 199 drafts.

So every running action holds a *slot* (``--workers`` of them: the CPU it may use at once) and a
*stage*: :data:`DRAFT` until it has sent its draft, :data:`REST` after. When a slot frees, it goes
to the waiting action with the lowest ``(stage, arrival)``: every action that has not reached its
draft goes before any that has, and within a stage the earlier arrival goes first (fair: an
action's place never moves back, and nothing waits behind a later arrival of its own stage).
An action that reaches its draft calls :meth:`StageScheduler.advance`: it keeps its slot if no
one waits for an earlier stage, otherwise it hands the slot over and waits its turn.

The slot is handed to one waiter directly (its own :class:`threading.Event`), so a release wakes
exactly one thread, not every parked one. Nothing here reads a clock: the order is a function of
the calls alone (tests/test_service_sched.py checks it without timing anything).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from dataclasses import dataclass, field

from cda.contracts.events import ActionCheckpoint, ActionEvent

__all__ = ["DRAFT", "REST", "StageScheduler", "Ticket", "is_draft"]

DRAFT = 0
"""Stage of an action that has not yet sent its draft boundary summary."""
REST = 1
"""Stage of an action whose draft is out (verification, bundles, the terminal event)."""


def is_draft(event: ActionEvent) -> bool:
    """Whether ``event`` is the draft boundary summary (what TTFS measures; the end of DRAFT)."""
    return (isinstance(event, ActionCheckpoint) and event.kind == "boundary_summary"
            and event.payload.get("draft") is True)


@dataclass(order=True)
class Ticket:
    """One action's place: ``(stage, arrival)`` orders the waiting; ``granted`` wakes its thread."""

    stage: int
    arrival: int
    granted: threading.Event = field(default_factory=threading.Event, compare=False)
    holding: bool = field(default=False, compare=False)


class StageScheduler:
    """``slots`` actions run at once; the rest wait in a priority queue of (stage, arrival)."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a scheduler needs at least one slot, got {slots}")
        self.slots = slots
        self._free = slots
        self._waiting: list[Ticket] = []
        self._lock = threading.Lock()
        self._arrivals = itertools.count()

    def ticket(self) -> Ticket:
        """A place for a newly submitted action (stage :data:`DRAFT`, the next arrival number)."""
        with self._lock:
            return Ticket(DRAFT, next(self._arrivals))

    def acquire(self, ticket: Ticket) -> None:
        """Block until ``ticket`` holds a slot."""
        with self._lock:
            if self._free > 0 and (not self._waiting or self._waiting[0] > ticket):
                self._free -= 1
                ticket.holding = True
                return
            ticket.granted.clear()
            heapq.heappush(self._waiting, ticket)
        ticket.granted.wait()

    def release(self, ticket: Ticket) -> None:
        """``ticket`` gives its slot back: to the best waiter, or to the free pool."""
        if not ticket.holding:
            return
        with self._lock:
            ticket.holding = False
            self._hand_over()

    def advance(self, ticket: Ticket, stage: int) -> None:
        """``ticket`` moves on to ``stage``; it keeps running unless an earlier stage (or an earlier
        arrival of the same stage) waits, in which case the slot goes there and this call blocks
        until the slot comes back by the same rule."""
        if not ticket.holding:
            ticket.stage = stage
            return
        with self._lock:
            ticket.stage = stage
            if not self._waiting or self._waiting[0] > ticket:
                return
            ticket.holding = False
            self._hand_over()
            ticket.granted.clear()
            heapq.heappush(self._waiting, ticket)
        ticket.granted.wait()

    def _hand_over(self) -> None:
        """One slot is free (caller holds the lock): the best waiter gets it, else it is kept."""
        if self._waiting:
            best = heapq.heappop(self._waiting)
            best.holding = True
            best.granted.set()
        else:
            self._free += 1

    def waiting(self) -> list[tuple[int, int]]:
        """``(stage, arrival)`` of every waiting action, best first (for tests and ``debug``)."""
        with self._lock:
            return [(t.stage, t.arrival) for t in sorted(self._waiting)]

    @property
    def running(self) -> int:
        with self._lock:
            return self.slots - self._free
