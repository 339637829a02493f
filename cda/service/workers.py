"""Runner processes: the actions' CPU on every core, their streams still written by the server.

Under one interpreter the runners share one core (the GIL); ``cda serve --processes N`` runs
them in N child processes instead. The server stays the one writer of every stream: a runner in
a child sends each event to the server over one pipe (so in order); the server stores and
publishes it. At two events the run waits for the server's answer (``go``, or ``stop``): the
draft boundary summary, where the scheduler may park it until every queued draft is out (the
stages hold across processes), and the terminal event, after which the run writes its
``action.end`` receipt naming the stored events (so that receipt never names an event the server
has not stored). Other events do not wait: a round trip per event leaves the child idle while
the server's loop holds the GIL. A ``stop`` (cancel, shutdown) reaches the run as in-process:
the server tells the child at once (:meth:`RunnerPool.stop`), which cancels the run's token (its
solver interrupted, its deadlines expired), so the run ends with what it found; a run past the
server's grace is ended at its next event (the server answers ``stop``), and the events a child
sent past the server's stop are not stored.

A child writes the run's receipts to the server's file itself (its own connection: the receipt
log is safe between processes, ``BEGIN IMMEDIATE``). It returns the finished
:class:`~cda.actions.runner.ActionRun` (pickled) for the server to keep. Everything a run reads
is in its job (inputs, bound outputs, the action id, thresholds), so its outputs are the same
bytes as an in-process run's (tests/test_service_sched.py compares them). Children are started
with ``spawn`` (never ``fork``: the server holds threads and SQLite connections) and end when
the server closes the pool, or at once when the server dies (their pipe reaches end of file).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from cda.contracts.deadline import CancelToken, cancel_scope
from cda.errors import CDAError
from cda.service.scheduler import is_draft

__all__ = ["AttemptSink", "RunnerCrashed", "RunnerStopped", "RunnerJob", "RunnerPool", "run_job", "waits_for_answer"]

TERMINAL = frozenset({"action_completed", "action_partial", "action_failed"})

READY_S = 120.0


class RunnerStopped(CDAError, RuntimeError):
    """The run was stopped in its runner process (it saw the stop asked for at an event of its own)."""


class RunnerCrashed(CDAError, RuntimeError):
    """A runner process failed the run (an internal error there, or the process died)."""


@dataclass
class RunnerJob:
    """What a child needs to run one action: everything the run reads."""

    action_id: str
    inputs: Any  # CDAInputs
    out_dir: Path
    thresholds: Any  # AbstainThresholds
    bound: list[Any] = field(default_factory=list)  # BoundOutput
    ken_path: Path | None = None  # internal profile only: a Ken file on the server
    revision: int = 1  # > 1 for a structure revision (an accepted update)
    supersedes: str | None = None  # the plan bundle a structure revision supersedes
    attempt: int = 1  # the attempt the service began: the run's receipts and events continue it
    prelude: list[Any] = field(default_factory=list)  # ActionEvent: what the service streamed before the run
    approval_waits: list[Any] = field(default_factory=list)  # ApprovalWait: the approvals it waited for (§10)
    access: Any = None  # cda.access.Access: what the run may touch (None: unrestricted, a local run)
    queued_since: float | None = None  # time.monotonic() of actions.start, moved on by approval waits (TTFS)


class AttemptSink:
    """The receipt log, for a run whose attempt the service already began: the runner's
    ``action.start`` continues that attempt instead of numbering a new one."""

    def __init__(self, log: Any, attempt: int) -> None:
        self.log = log
        self.attempt = attempt

    def append(self, receipt: Any) -> str:
        return str(self.log.append(receipt))

    def append_many(self, receipts: Any) -> list[str]:
        """Group commit (:meth:`~cda.actions.receipts_sink.Recorder.flush`): one transaction per event,
        not per receipt (without it a service run committed each of its ~136 receipts alone)."""
        return list(self.log.append_many(receipts))

    def head(self) -> str:
        return str(self.log.head())

    def begin_attempt(self, action_id: str, receipt_for: Callable[[int], Any]) -> tuple[int, str]:
        return self.attempt, str(self.log.append(receipt_for(self.attempt)))

    def confirm(self, appended: Sequence[str]) -> list[str]:
        return list(self.log.confirm(appended))


def run_job(job: RunnerJob, ken: Any, log: Any, on_event: Callable[[Any], None],
            audit: Callable[[Sequence[Any]], Sequence[str]] | None) -> Any:
    """The one call of the runner for a service action, in the server's process or a runner's:
    the run continues the attempt the service began, after the events already streamed
    (``prelude``), with its receipts filed under that attempt and ``audit`` checking the stored
    events before its terminal event."""
    from contextlib import nullcontext

    from cda.access import granted
    from cda.actions.runner import run_action
    from cda.adapters.action_entry import _http_provider

    with granted(job.access) if job.access is not None else nullcontext():
        return run_action(job.inputs, ken=ken, out_dir=job.out_dir, receipts=AttemptSink(log, job.attempt),
                          subscribers=[on_event], llm_factory=_http_provider, thresholds=job.thresholds,
                          action_id=job.action_id, bound=job.bound, revision=job.revision, supersedes=job.supersedes,
                          prelude=job.prelude, approval_waits=job.approval_waits, audit=audit,
                          queued_since=job.queued_since, base_dir=job.out_dir)


def waits_for_answer(event: Any) -> bool:
    """The events at which a child's run waits for the server (the draft, the terminal event)."""
    return bool(is_draft(event) or event.type in TERMINAL)


class _Stopped(BaseException):  # noqa: N818 - not an error: unwinds the child's run at an event
    """Raised inside a child's event callback when the server answers ``stop``."""


@dataclass
class _Child:
    process: Any
    conn: Connection
    send_lock: threading.Lock = field(default_factory=threading.Lock)
    inboxes: dict[str, queue.SimpleQueue[tuple[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    alive: bool = True

    def send(self, message: tuple[str, str, Any]) -> None:
        with self.send_lock:
            self.conn.send(message)


class RunnerPool:
    """``processes`` children that run actions; :meth:`run` runs one there, events come back."""

    def __init__(self, processes: int, db: Path, *, fsync: bool = False) -> None:
        if not 1 <= processes <= 64:
            raise ValueError(f"a runner pool has 1 to 64 processes, got {processes}")
        ctx = multiprocessing.get_context("spawn")
        self.children: list[_Child] = []
        for i in range(processes):
            mine, theirs = ctx.Pipe(duplex=True)
            process = ctx.Process(target=child_main, args=(theirs, str(db), fsync), name=f"cda-runner-{i}",
                                  daemon=True)
            process.start()
            theirs.close()
            self.children.append(_Child(process, mine))
        for child in self.children:  # each has imported the runner and opened the store
            if not child.conn.poll(READY_S) or child.conn.recv() != ("ready", "", None):
                self.close()
                raise RunnerCrashed("a runner process did not start")
        self._readers = [threading.Thread(target=self._read, args=(c,), name="cda-runner-reader", daemon=True)
                         for c in self.children]
        for t in self._readers:
            t.start()

    def __len__(self) -> int:
        return len(self.children)

    def _read(self, child: _Child) -> None:
        """Hand each message of ``child`` to the run it belongs to; on its death, fail them all."""
        while True:
            try:
                kind, action_id, payload = child.conn.recv()
            except (EOFError, OSError):
                break
            with child.lock:
                inbox = child.inboxes.get(action_id)
            if inbox is not None:
                inbox.put((kind, payload))
        with child.lock:
            child.alive = False
            for inbox in child.inboxes.values():
                inbox.put(("error", "the runner process ended"))

    def stop(self, index: int, action_id: str, attempt: int, reason: str = "cancelled",
             kind: str = "cancelled") -> None:
        """Tell the child running ``action_id``'s ``attempt`` to stop, as an in-process run is
        stopped: its token is cancelled there (its solver interrupted, its deadlines expired), at once."""
        child = self.children[index]
        with child.lock:
            if not child.alive:
                return
        try:
            child.send(("cancel", action_id, (attempt, reason, kind)))
        except (OSError, ValueError):
            pass

    def run(self, index: int, job: RunnerJob, on_event: Callable[[Any], None],
            audit: Callable[[Sequence[Any]], Sequence[str]] | None = None,
            stopping: Callable[[], bool] = lambda: False) -> Any:
        """Run ``job`` in child ``index``; each event goes to ``on_event`` (in this thread) before the
        run goes on. An exception ``on_event`` raises stops the run there and is re-raised here.
        ``audit`` is the server's check of the stored events, asked by the run before its terminal
        event: the pipe is ordered, so every event the run sent before is stored by then.
        ``stopping`` says whether the run was asked to stop before it reached the child."""
        child = self.children[index]
        inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        with child.lock:
            if not child.alive:
                raise RunnerCrashed("the runner process has ended")
            child.inboxes[job.action_id] = inbox
        try:
            child.send(("run", job.action_id, job))
            if stopping():  # asked before it was here: RunnerPool.stop may have found no child to tell
                self.stop(index, job.action_id, job.attempt)
            while True:
                kind, payload = inbox.get()
                try:
                    if kind == "event":
                        on_event(payload)
                        if waits_for_answer(payload):
                            child.send(("reply", job.action_id, "go"))
                    elif kind == "audit":
                        problems = list(audit(payload)) if audit is not None else []
                        child.send(("reply", job.action_id, problems))
                except BaseException:  # the run must unwind in the child too, never wait there forever
                    child.send(("reply", job.action_id, "stop"))
                    # until the child has unwound the run (its last message: a later attempt of
                    # the same action id in this child must never get it)
                    last = kind if kind == "audit" else "event"
                    while last == "event":
                        last = inbox.get()[0]
                    if last == "audit":  # it waits for the audit's answer: the stop is that answer
                        inbox.get()
                    raise
                if kind in ("event", "audit"):
                    continue
                if kind == "done":
                    return payload
                if kind == "stopped":  # it saw the stop (a cancel, a shutdown) before the server did
                    raise RunnerStopped(job.action_id)
                raise RunnerCrashed(f"the run failed in its runner process: {payload}")
        finally:
            with child.lock:
                child.inboxes.pop(job.action_id, None)

    def close(self) -> None:
        """End the children (after the runs: the server waits for its threads first)."""
        for child in self.children:
            try:
                child.send(("exit", "", None))
            except (OSError, ValueError):
                pass
        for child in self.children:
            child.process.join(2)  # its runs were stopped first; one that does not exit now is killed
            if child.process.is_alive():
                child.process.kill()
                child.process.join(5)
            child.conn.close()


def child_main(conn: Connection, db: str, fsync: bool) -> None:
    """A runner process: runs each action it is sent in a thread of its own, until ``exit``.
    Ctrl-C on the server's terminal reaches this process too (one process group): it is the
    server's to handle (it stops the runs here), so it is ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from cda.actions.receipts import ReceiptLog
    from cda.keys.signing import load_signer
    from cda.service.sqlite_writes import relax_fsync

    log = ReceiptLog(Path(db), signer=load_signer())  # the server's key: the runs' receipts are vouched for
    if not fsync:
        relax_fsync(log)
    send_lock = threading.Lock()
    replies: dict[str, queue.SimpleQueue[str]] = {}
    cancels: dict[tuple[str, int], CancelToken] = {}  # by (action id, attempt): never a later attempt's

    def send(message: tuple[str, str, Any]) -> None:
        with send_lock:
            conn.send(message)

    def run_one(job: RunnerJob, answers: queue.SimpleQueue[str], cancel: CancelToken) -> None:
        def on_event(event: Any) -> None:
            send(("event", job.action_id, event))
            if waits_for_answer(event):
                if answers.get() == "stop":
                    raise _Stopped
            elif not answers.empty():  # only a stop can be waiting here (the server's grace ran out)
                answers.get()
                raise _Stopped

        def audit(events: Sequence[Any]) -> list[str]:  # the server checks what it stored
            send(("audit", job.action_id, list(events)))
            answer = answers.get()
            if answer == "stop":
                raise _Stopped
            return list(answer)

        try:
            ken = None
            if job.ken_path is not None:
                from contextlib import nullcontext

                from cda.access import granted
                from cda.ken.loaders import load_ken

                with granted(job.access) if job.access is not None else nullcontext():
                    ken = load_ken(job.ken_path)
            with cancel_scope(cancel):  # a cancel interrupts its solver, expires its deadlines
                result = run_job(job, ken, log, on_event, audit)
            send(("done", job.action_id, result))
        except _Stopped:
            send(("stopped", job.action_id, None))
        except BaseException as exc:  # noqa: BLE001 - reported to the server, which ends the stream
            send(("error", job.action_id, type(exc).__name__))
        finally:
            if replies.get(job.action_id) is answers:  # not a later attempt's
                replies.pop(job.action_id, None)
            cancels.pop((job.action_id, job.attempt), None)

    send(("ready", "", None))
    while True:
        try:
            kind, action_id, payload = conn.recv()
        except (EOFError, OSError):  # the server died: nothing left to run for, at once
            # (a normal exit would wait for a run's pool threads, an LLM call for up to its timeout,
            # and the run would go on writing receipts after a restarted server marked it interrupted)
            os._exit(0)
        if kind == "run":
            replies[action_id] = queue.SimpleQueue()
            cancel = cancels.setdefault((action_id, payload.attempt), CancelToken())
            threading.Thread(target=run_one, args=(payload, replies[action_id], cancel), daemon=True).start()
        elif kind == "cancel":
            attempt, reason, how = payload
            cancels.setdefault((action_id, int(attempt)), CancelToken()).cancel(str(reason), str(how))
        elif kind == "reply" and action_id in replies:
            replies[action_id].put(payload)
        elif kind == "exit":
            break
    log.close()
