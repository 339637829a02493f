"""Scheduling: where and when an action's run executes, and how it is stopped.

Each action runs in a thread of its own (a bounded pool) through
:func:`cda.actions.runner.run_action`, but only ``workers`` of them at once: a
:class:`~cda.service.scheduler.StageScheduler` hands out the slots, every action's way to its
draft boundary summary before any action's rest (TTFS, spec §10; docs/service.md, "Throughput").
With ``--processes N`` the runs execute in runner processes (:mod:`cda.service.workers`), one
scheduler per process.

*Fairness* (docs/service.md, "Fairness"): on a server with ``--auth`` one partner's actions hold
at most ``partner_slots`` of a scheduler's slots (default half the workers, at least one). *The
partner wall cap*: a partner's action runs at most ``partner_wall`` seconds (``cda serve
--partner-wall``, default 300): its ``budgets.wall`` is lowered to it (:meth:`Scheduling.capped`,
a receipt), and a run still going at the cap is cancelled as the budget's backstop.

*Stops* (docs/service.md, "Cancel"): ``actions.cancel`` and the server stopping cancel the run's
:class:`~cda.contracts.deadline.CancelToken` (:meth:`Scheduling.stop`), which interrupts its
solver and expires its deadlines, so it ends at once with what it found (``action_partial``,
``stopped``); a runner process is told at once. A run that has not ended :data:`STOP_GRACE_S`
later (a call that reads no deadline) is ended at its next event without its findings
(:meth:`Scheduling.after_event` raises :class:`~cda.service.live.Stop`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionEvent
from cda.service.attempts import Attempts
from cda.service.event_reads import TERMINAL
from cda.service.live import STOPS, LiveAction, Stop
from cda.service.scheduler import DRAFT, REST, StageScheduler, is_draft
from cda.service.workers import RunnerPool

__all__ = ["MAX_THREADS", "PARTNER_WALL_S", "SHUTDOWN_WAIT_S", "STOP_GRACE_S", "Scheduling"]

MAX_THREADS = 256
"""Actions that may hold a thread at once (running, or parked by the scheduler after their draft);
more wait for a thread in submission order. A parked thread costs its stack, not CPU."""

PARTNER_WALL_S = 300.0
"""A partner's action runs at most this long (``cda serve --partner-wall``)."""

STOP_GRACE_S = 10.0
"""After a cancel (or the server stopping) the run has this long to end with what it found; past
it, its next event ends it without (``action_failed``, ``ActionCancelled``/``ActionInterrupted``)."""

SHUTDOWN_WAIT_S = 3.0
"""How long stopping the server waits for its runs to end after their solvers were interrupted."""


class Scheduling:
    """The threads, slots and runner processes of the server's runs."""

    def __init__(self, db: Path, attempts: Attempts, *, workers: int = 2, processes: int = 0,
                 fsync_each_commit: bool = False, open_server: bool = True,
                 partner_wall: float | None = PARTNER_WALL_S, partner_slots: int | None = None) -> None:
        self.attempts = attempts
        # in-process: one scheduler with `workers` slots; with runner processes: `workers` slots in
        # each (two runs per process keep it busy while the other waits for the server's answer)
        self.runners = RunnerPool(processes, db, fsync=fsync_each_commit) if processes else None
        # an open server's clients are all one anonymous partner: no per-partner limit there
        self.open = open_server
        per_owner = None if open_server else (partner_slots or max(1, workers // 2))
        self.schedulers = [StageScheduler(workers, per_owner) for _ in range(max(1, processes))]
        self.scheduler = self.schedulers[0]
        self.partner_wall = partner_wall
        self.pool = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="cda-action")
        self._lanes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _partner(run: LiveAction) -> bool:
        return run.owner.role == "partner"

    # -- running ----------------------------------------------------------------------------
    def submit(self, run: LiveAction, execute: Callable[[LiveAction], None]) -> None:
        """Queue ``run``: its place (stage DRAFT, the next arrival) is taken now; ``execute`` runs
        it in a thread of the pool once the scheduler grants a slot."""
        with self._lock:  # the lanes (runner processes) take the actions in turn
            run.lane, self._lanes = self._lanes % len(self.schedulers), self._lanes + 1
        owner = run.owner.name if self._partner(run) and not self.open else None
        run.ticket = self.schedulers[run.lane].ticket(owner)
        self.pool.submit(self._slot, run, execute)

    def _slot(self, run: LiveAction, execute: Callable[[LiveAction], None]) -> None:
        assert run.ticket is not None
        scheduler = self.schedulers[run.lane]
        scheduler.acquire(run.ticket)
        cap = None
        if self._partner(run) and self.partner_wall is not None:  # the budget's backstop
            cap = threading.Timer(self.partner_wall, self._cap_reached, args=(run,))
            cap.daemon = True
            cap.start()
        try:
            execute(run)
        finally:
            if cap is not None:
                cap.cancel()
            scheduler.release(run.ticket)

    def capped(self, run: LiveAction, inputs: CDAInputs) -> CDAInputs:
        """A partner's inputs with ``budgets.wall`` at most the partner wall cap (a receipt says so
        when it lowered it): the run's own budget, ladder and partial then keep the cap."""
        cap, wall = self.partner_wall, inputs.budgets.wall
        if not self._partner(run) or cap is None or (wall is not None and wall <= cap):
            return inputs
        self.attempts.receipt(run.action_id, "service.wall_cap", {"principal": run.owner.name},
                              {"wall": cap, "asked": wall}, attempt=run.attempt)
        return inputs.model_copy(update={"budgets": inputs.budgets.model_copy(update={"wall": cap})})

    def _cap_reached(self, run: LiveAction) -> None:
        reason = f"the partner wall cap of {self.partner_wall:g} s was reached (cda serve --partner-wall)"
        run.token.cancel(reason, "timeout")  # a budget, not a stop: an ordinary partial
        if self.runners is not None:
            self.runners.stop(run.lane, run.action_id, run.attempt, reason, "timeout")

    def after_event(self, run: LiveAction, event: ActionEvent) -> None:
        """What an event of ``run`` means here: past its draft it yields its slot to the queued
        drafts; a stopped run past its grace is ended (:class:`~cda.service.live.Stop`)."""
        if run.ticket is not None and run.ticket.stage == DRAFT and is_draft(event):
            self.schedulers[run.lane].advance(run.ticket, REST)  # the draft is out: the others' drafts go first
        if run.stop is not None and event.type not in TERMINAL and self.overdue(run):
            raise Stop(run.stop)

    # -- stopping ---------------------------------------------------------------------------
    def stop(self, run: LiveAction, reason: str) -> None:
        """Stop ``run`` (``reason``: ``ActionCancelled`` or ``ActionInterrupted``, see the module's docstring)."""
        if run.stop is None:
            run.stop, run.stopped_at = reason, time.monotonic()
        run.token.cancel(*STOPS[reason])
        if self.runners is not None:
            self.runners.stop(run.lane, run.action_id, run.attempt, *STOPS[reason])

    @staticmethod
    def overdue(run: LiveAction) -> bool:
        return run.stopped_at is not None and time.monotonic() - run.stopped_at > STOP_GRACE_S

    def wait(self, runs: Sequence[LiveAction], wait_s: float) -> int:
        """Wait at most ``wait_s`` for ``runs`` to end; how many did not (their threads hold code
        that reads no deadline). The runner processes are closed."""
        self.pool.shutdown(wait=False, cancel_futures=False)
        end = time.monotonic() + wait_s
        for run in runs:
            run.settled.wait(max(0.0, end - time.monotonic()))
        stuck = sum(1 for run in runs if not run.settled.is_set())
        if self.runners is not None:
            self.runners.close()
        return stuck
