"""Attempts: the server's writers of its file, and each run of an action begun, vouched for, ended.

Every run of an action id is an attempt (docs/actions.md, "Attempts"), begun by the service
itself (its ``service.start`` receipt is numbered by the log): everything the service streams
for the action — ``action_waiting_user``, ``action_linked`` and notices before the run, the
terminal event of a cancel or an interruption — is filed under that attempt, and the runner
continues the same attempt (its events follow the service's, so ``action.end`` vouches for them
all). After each attempt ends the service signs the log's head (``<store>.head.json``, as
``cda run`` does), so ``cda receipts verify`` checks a server's file like any other.

The service sequences each stream: every event gets the next ``seq`` of the action, is stored
(:class:`~cda.adapters.event_store.EventStore`, the SQLite file of the server) and then handed to
the :class:`~cda.service.streams.Hub`, which wakes that action's subscribers (:meth:`Attempts.record`).

*Restarts*: an action the store holds unfinished when the server starts was cut off by a crash;
it gets a terminal ``action_failed`` with ``error_type: "ActionInterrupted"`` and a receipt
(:meth:`Attempts.recover`), so no client ever sees it "running" forever.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from cda.actions.audit import file_meta_digest
from cda.actions.event_chain import events_head
from cda.actions.receipts import ReceiptLog
from cda.actions.reflection import ReflectionStore
from cda.adapters.action_entry import AuditLogError, check_signed_head, refuse_lost_log
from cda.adapters.auth import Principal
from cda.adapters.event_store import EventStore, check_event_file
from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionEvent, ActionFailed, ActionUpdateAvailable
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.keys.signing import head_path, load_signer, read_head, write_head
from cda.service.event_reads import (
    POST_TERMINAL,
    TERMINAL,
    StoredEvent,
    ended,
    last_events,
    read_stream,
    started_without_events,
)
from cda.service.live import LiveAction, json_object
from cda.service.sqlite_writes import relax_fsync, share_write_lock
from cda.service.state import check_state
from cda.service.streams import Hub
from cda.store import read_snapshot

__all__ = ["Attempts", "check_signable"]


class Attempts:
    """The event store, the receipt log and the reflection store of the server's file, one writer
    lock among them, and the signing of the log's head after every attempt."""

    def __init__(self, db: Path, hub: Hub, *, fsync_each_commit: bool = False) -> None:
        self.db = db
        self.hub = hub
        self.signer = load_signer()  # the key `cda run` signs with ($CDA_KEY_DIR)
        self.events = EventStore(db)
        self.log = ReceiptLog(db, signer=self.signer)  # every receipt vouched for where it lands
        self.reflection = ReflectionStore(db, self.log)
        if not fsync_each_commit:
            for store in (self.events, self.log, self.reflection):
                relax_fsync(store)
        share_write_lock(self.events, self.log, self.reflection)
        self.sign_lock = threading.Lock()
        self.tampered = False  # set once a signing found the log rewritten: nothing is signed after that
        self.notices = threading.Lock()  # one post-terminal notice appended at a time
        with self.sign_lock:
            self.check_log()  # never sign on top of a rewritten log (before the state file is touched)

    # -- receipts ---------------------------------------------------------------------------
    def receipt(self, action_id: str, name: str, inputs: dict[str, Any], result: dict[str, Any],
                status: str = "ok", attempt: int | None = None) -> None:
        """One receipt of the service's own (approvals, cancels, refusals, interruptions), filed
        under ``attempt`` when it concerns one run of the action."""
        self.log.append(Receipt(action_id=action_id, seq=self.log.count(action_id), kind="action", name=name,
                                inputs_hash=sha256_hex(canonical_json(inputs)), result=result,
                                status=status, attempt=attempt))  # type: ignore[arg-type]

    def begin(self, action_id: str, name: str, inputs: dict[str, Any], result: dict[str, Any]) -> int:
        """Begin a new attempt of ``action_id`` with the service's receipt ``name``; its number."""
        seq = self.log.count(action_id)
        attempt, _ = self.log.begin_attempt(action_id, lambda n: Receipt(
            action_id=action_id, seq=seq, kind="action", name=name, inputs_hash=sha256_hex(canonical_json(inputs)),
            result=result, attempt=n))
        return attempt

    def close(self, run: LiveAction, status: str) -> None:
        """End an attempt the runner did not end (a cancel, a short escalation, a sub-action
        revision): its ``action.end`` vouches for the events it streamed; then sign."""
        self.receipt(run.action_id, "action.end", {"attempt": run.attempt}, {
            "status": status, "events": len(run.events), "events_head": events_head(run.events)},
            attempt=run.attempt)
        self.sign(run.action_id, run.attempt, run.events)

    # -- events -----------------------------------------------------------------------------
    def record(self, run: LiveAction, event: ActionEvent) -> ActionEvent:
        """Number ``event`` in ``run``'s attempt, give it its time when it has none (the service's
        own events: revisions, waits, notices, the ends of stops; a runner's events keep the
        time their stream gave them), store it and publish it; the stored event. Every stored
        event has a ``ts``: the retention sweep ages streams by it."""
        with run.lock:
            stamp = {"ts": time.time()} if event.ts is None else {}
            event = event.model_copy(update={"seq": run.next_seq, "attempt": run.attempt, **stamp})
            run.next_seq += 1
            body = self.events.store(event)  # its canonical JSON, stored and now streamed
            run.events.append(event)
        self.hub.publish_threadsafe(run.action_id, StoredEvent(event.seq, event.type, body, run.attempt))
        return event

    def terminal(self, run: LiveAction, error: str, error_type: str) -> None:
        """End ``run``'s stream with ``action_failed`` (the service's own end of an attempt)."""
        run.stop = None
        self.record(run, ActionFailed(action_id=run.action_id, seq=0, error=error, error_type=error_type))

    def offer_update(self, action_id: str, sub_action: str, revision: int, sha256: str, artifact_id: str) -> bool:
        """Tell ``action_id``'s stream that ``sub_action`` is offered to it: an
        ``action_update_available`` event after its latest attempt's terminal event (the next seq
        of that attempt), an ``update.offered`` receipt naming that seq and the SHA-256 of the
        event's stored body (what ``cda receipts verify`` accepts after ``action.end``), then a
        signed head over both. Only once that attempt has ended (its ``action.end`` is in the log:
        a live run numbers its own events) and once per revision and attempt; whether it was appended.

        The event is stored before its receipt: a server killed between the two leaves an event no
        receipt vouches for, which ``cda receipts verify`` reports as tampered (docs/service.md)."""
        with self.notices:
            events = read_stream(self.db, action_id, None)
            if not events or ended(events) is None:
                return False
            attempt = events[-1].attempt
            if not any(e.receipt.name == "action.end" and e.receipt.attempt == attempt
                       for e in self.log.entries(action_id)):
                return False  # the run is still writing its end
            if any(e.type in POST_TERMINAL and json_object(e.data).get("sub_action") == sub_action for e in events):
                return False
            notice = ActionUpdateAvailable(action_id=action_id, seq=events[-1].seq + 1, attempt=attempt, ts=time.time(),
                                           sub_action=sub_action, revision=revision, sha256=sha256,
                                           artifact_id=artifact_id)
            body = self.events.store(notice)
            self.receipt(action_id, "update.offered", {"sub_action": sub_action},
                         {"event_seq": notice.seq, "event_sha256": sha256_hex(body)}, attempt=attempt)
        self.hub.publish_threadsafe(action_id, StoredEvent(notice.seq, notice.type, body, attempt))
        self._sign_stored(action_id, attempt)
        return True

    # -- signing ----------------------------------------------------------------------------
    def sign(self, action_id: str, attempt: int, events: Sequence[ActionEvent]) -> None:
        """Sign the log's head after an attempt ended (``cda receipts verify`` wants every
        ``action.end`` under a signature); one at a time, so the last head written is the latest."""
        self._sign_head(action_id, attempt, len(events), events_head(events, timeless=False))

    def _sign_stored(self, action_id: str, attempt: int) -> None:
        """:meth:`sign` over the attempt's events as stored (after a post-terminal notice): the
        chain head of the full bodies is the last row's entry hash."""
        with self.events.file.lock:
            row = self.events.file.conn.execute(
                "SELECT seq, entry_hash FROM events WHERE action_id = ? AND attempt = ? ORDER BY seq DESC LIMIT 1",
                (action_id, attempt)).fetchone()
        if row is not None:
            self._sign_head(action_id, attempt, int(row[0]) + 1, str(row[1]))

    def _sign_head(self, action_id: str, attempt: int, events: int, full_head: str) -> None:
        with self.sign_lock:
            if not self._signable(action_id, attempt):
                return
            head, count = self.log.tip()
            write_head(head_path(self.db), self.signer.sign_head(
                head, count, action_id, attempt, "end", events, full_head, file_meta_digest(self.db)))

    def check_log(self, recorded: bool = True) -> None:
        """:func:`~cda.adapters.action_entry.check_signed_head` on the open log (AuditLogError)."""
        check_signed_head(self.db, self.log, self.signer.public_key, recorded=recorded)

    def _signable(self, action_id: str, attempt: int) -> bool:
        """Under ``sign_lock``, before a head is signed: whether the log still holds the head signed
        last (and CDA's schema). A server lives for days; a log rewritten meanwhile (receipts
        deleted past the triggers) must not get a signature over the rewrite. If it was, nothing is
        signed, from now on, and an ``action.tampered`` receipt records it, as ``cda run`` does:
        ``cda receipts verify`` reports it and the next start of a server or a run refuses the log."""
        if self.tampered:
            return False
        try:  # recorded tampering was checked at start; since then the server tracks its own (7 ms, not 29 ms, at 30k receipts)
            self.check_log(recorded=False)
        except AuditLogError as exc:
            self.tampered = True
            self.receipt(action_id, "action.tampered", {"attempt": attempt}, {"problems": [str(exc)]},
                         status="failed", attempt=attempt)
            print(f"cda serve: {exc}; no head is signed any more", file=sys.stderr, flush=True)
            return False
        return True

    # -- restarts ---------------------------------------------------------------------------
    def recover(self, live: Collection[str]) -> list[str]:
        """Mark every action the store holds unfinished (and not in ``live``) as interrupted: the
        server restarted under it. The ids marked."""
        marked = []
        unfinished = [(a, last.attempt, last.seq) for a, last in last_events(self.db).items()
                      if last.type not in TERMINAL]
        unfinished += [(a, attempt, -1) for a, attempt in started_without_events(self.db)]
        for action_id, attempt, last_seq in unfinished:
            if action_id in live:
                continue
            run = LiveAction(action_id, Principal("server", "internal"), CDAInputs(problem="(interrupted)"),
                             next_seq=last_seq + 1, attempt=attempt)  # its terminal event: in the attempt it ends
            self.receipt(action_id, "action.interrupted", {"last_event_id": last_seq},
                         {"reason": "the server stopped while the action ran"}, status="failed", attempt=attempt)
            self.terminal(run, "interrupted: the server stopped while the action ran; start it again",
                          "ActionInterrupted")
            marked.append(action_id)
        self._sign_found()
        return marked

    def _sign_found(self) -> None:
        """Sign the log as this start finds it, when entries follow the signed head: what the
        stopped server wrote after its last signature (an attempt it ended in the instant before
        kill -9, the interruptions just marked) is vouched for now, as the next attempt's end
        would vouch for it anyway. A ``start`` head: it names no attempt's events."""
        head, count = self.log.tip()
        path = head_path(self.db)
        if count == 0 or (path.exists() and read_head(path)["count"] == count):
            return
        action_id, attempt = read_snapshot(self.db, lambda conn: conn.execute(
            "SELECT action_id, json_extract(body, '$.attempt') FROM receipts ORDER BY rowid DESC LIMIT 1").fetchone())
        with self.sign_lock:
            if self._signable(str(action_id), int(attempt or 1)):
                head, count = self.log.tip()
                write_head(path, self.signer.sign_head(head, count, str(action_id), int(attempt or 1), "start"))

    def close_stores(self) -> None:
        self.reflection.close()
        self.log.close()
        self.events.close()


def check_signable(db: Path) -> None:
    """The server's pre-flight on ``db``, before anything is created or modified (a
    :class:`~cda.errors.CDAError` that says what is wrong; ``cda serve`` exits 2): the log is not
    gone or wiped under a kept signed head (the check ``cda run`` makes), it is CDA's file, the state file is the
    service's own, the signing key can be read (or made), and the log still holds the head signed
    last and CDA's schema. :class:`Attempts` checks the log again when it opens it."""
    refuse_lost_log(db)  # before anything is created: a new empty log beside a kept head buries evidence
    if db.exists():
        check_event_file(db)  # CDA's own file (a foreign one is never modified), read without a trace
    check_state(db)  # the service's own state file, of a version this CDA reads, or refused untouched
    if not db.exists():
        return
    signer = load_signer()
    log = ReceiptLog(db)
    try:
        check_signed_head(db, log, signer.public_key)
    finally:
        log.close()
