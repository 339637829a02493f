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

**Fairness between partners** (docs/service.md, "Fairness"). A ticket may name its *owner* (a
partner on a server with ``--auth``); an owner holds at most ``per_owner`` slots at once, so one
partner's actions cannot hold every worker while another partner's wait (before: one partner's
hard actions held both workers and a small action of another partner waited 106 s). A slot is
handed to the best waiter whose owner is below the limit; a waiter whose owner is at it keeps
its place and is passed over until one of its owner's actions gives a slot back. The limit is
not work-conserving on purpose: a slot may stay free while an owner at its limit waits, so that
the next partner to arrive finds it free instead of behind an action that may run for minutes.
Tickets without an owner (the internal profile; every client of an open server, which are all
one anonymous partner) are not limited.

The slot is handed to one waiter directly (its own :class:`threading.Event`), so a release wakes
exactly one thread, not every parked one. Nothing here reads a clock: the order is a function of
the calls alone (tests/test_service_sched.py checks it without timing anything).
"""

from __future__ import annotations

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
    """One action's place: ``(stage, arrival)`` orders the waiting; ``granted`` wakes its thread;
    ``owner`` (a partner's name, or ``None``) is what the per-owner limit counts."""

    stage: int
    arrival: int
    granted: threading.Event = field(default_factory=threading.Event, compare=False)
    holding: bool = field(default=False, compare=False)
    owner: str | None = field(default=None, compare=False)


class StageScheduler:
    """``slots`` actions run at once, at most ``per_owner`` of one owner's (``None``: no limit);
    the rest wait, best (stage, arrival) first among those whose owner may run one more."""

    def __init__(self, slots: int, per_owner: int | None = None) -> None:
        if slots < 1:
            raise ValueError(f"a scheduler needs at least one slot, got {slots}")
        if per_owner is not None and per_owner < 1:
            raise ValueError(f"an owner needs at least one slot, got {per_owner}")
        self.slots = slots
        self.per_owner = per_owner
        self._free = slots
        self._waiting: list[Ticket] = []  # sorted, best first
        self._held: dict[str, int] = {}  # owner -> slots its tickets hold
        self._lock = threading.Lock()
        self._arrivals = itertools.count()

    def ticket(self, owner: str | None = None) -> Ticket:
        """A place for a newly submitted action (stage :data:`DRAFT`, the next arrival number)."""
        with self._lock:
            return Ticket(DRAFT, next(self._arrivals), owner=owner)

    def acquire(self, ticket: Ticket) -> None:
        """Block until ``ticket`` holds a slot."""
        with self._lock:
            if self._free > 0 and self._may_run(ticket) and self._first_eligible_after(ticket):
                self._free -= 1
                self._grant(ticket)
                return
            self._park(ticket)
        ticket.granted.wait()

    def release(self, ticket: Ticket) -> None:
        """``ticket`` gives its slot back: to the best waiter that may run, or to the free pool."""
        if not ticket.holding:
            return
        with self._lock:
            self._ungrant(ticket)
            self._hand_over()

    def advance(self, ticket: Ticket, stage: int) -> None:
        """``ticket`` moves on to ``stage``; it keeps running unless an earlier stage (or an earlier
        arrival of the same stage) that may run waits, in which case the slot goes there and this
        call blocks until the slot comes back by the same rule."""
        if not ticket.holding:
            ticket.stage = stage
            return
        with self._lock:
            ticket.stage = stage
            if self._first_eligible_after(ticket, holding=ticket):
                return
            self._ungrant(ticket)
            self._hand_over()
            self._park(ticket)
        ticket.granted.wait()

    # -- under the lock
    def _may_run(self, ticket: Ticket, holding: Ticket | None = None) -> bool:
        """Whether ``ticket``'s owner is below its limit (counting ``holding``'s slot as given back)."""
        if ticket.owner is None or self.per_owner is None:
            return True
        held = self._held.get(ticket.owner, 0)
        if holding is not None and holding.owner == ticket.owner:
            held -= 1
        return held < self.per_owner

    def _first_eligible_after(self, ticket: Ticket, holding: Ticket | None = None) -> bool:
        """No waiter that may run comes before ``ticket``."""
        return not any(w < ticket and self._may_run(w, holding) for w in self._waiting)

    def _grant(self, ticket: Ticket) -> None:
        ticket.holding = True
        if ticket.owner is not None:
            self._held[ticket.owner] = self._held.get(ticket.owner, 0) + 1

    def _ungrant(self, ticket: Ticket) -> None:
        ticket.holding = False
        if ticket.owner is not None:
            left = self._held[ticket.owner] - 1
            if left:
                self._held[ticket.owner] = left
            else:
                del self._held[ticket.owner]

    def _park(self, ticket: Ticket) -> None:
        ticket.granted.clear()
        self._waiting.append(ticket)
        self._waiting.sort()

    def _hand_over(self) -> None:
        """One slot is free: the best waiter that may run gets it, else it is kept."""
        for i, best in enumerate(self._waiting):
            if self._may_run(best):
                del self._waiting[i]
                self._grant(best)
                best.granted.set()
                return
        self._free += 1

    def waiting(self) -> list[tuple[int, int]]:
        """``(stage, arrival)`` of every waiting action, best first (for tests and ``debug``)."""
        with self._lock:
            return [(t.stage, t.arrival) for t in self._waiting]

    def holding(self, owner: str) -> int:
        """How many slots ``owner``'s actions hold now."""
        with self._lock:
            return self._held.get(owner, 0)

    @property
    def running(self) -> int:
        with self._lock:
            return self.slots - self._free
