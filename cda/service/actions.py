"""Actions the server runs: started over the ToolBus, run off the event loop, streamed as they go.

Each action runs in a thread of its own (a bounded pool) through :func:`cda.actions.runner.run_action`,
but only ``workers`` of them at once: a :class:`~cda.service.scheduler.StageScheduler`
hands out the slots, every action's way to its draft boundary summary before any action's rest
(TTFS, spec §10; docs/service.md, "Throughput"). The service sequences each stream: every event gets the next ``seq`` of the action, is stored
(:class:`~cda.adapters.event_store.EventStore`, the SQLite file of the server) and then handed
to the :class:`~cda.service.streams.Hub`, which wakes that action's subscribers.

*At the server edge* (before anything runs): a partner may not name a file on the server
(``ken.path``) or run code (``functions``); an egress class above the server's cap or a PII
posture of ``consent`` needs an approval: the action waits (``action_waiting_user``) until
``actions.approve`` or ``actions.deny`` (approvals-as-input, each one a receipt). A denial runs
the action within the cap, so its external checks become receipt stubs and its summary is the
conservative one (QA scenario 3).

*Cancel* takes effect at the action's next event (a terminal ``action_failed`` with
``error_type: "ActionCancelled"``). *Restarts*: an action the store holds unfinished when the
server starts was cut off by a crash; it gets a terminal ``action_failed`` with
``error_type: "ActionInterrupted"`` and a receipt, so no client ever sees it "running" forever;
starting an interrupted or cancelled action again runs a new attempt of it.

*Attempts.* Every run of an action id is an attempt (issue 13), begun by the service itself
(its ``service.start`` receipt is numbered by the log): everything the service streams for the
action — ``action_waiting_user``, ``action_linked`` and notices before the run, the terminal
event of a cancel or an interruption — is filed under that attempt, and the runner continues the
same attempt (its events follow the service's, so ``action.end`` vouches for them all). After
each attempt ends the service signs the log's head (``<store>.head.json``, as ``cda run`` does),
so ``cda receipts verify`` checks a server's file like any other.

*State across restarts* (owners, sub-action revisions, the bindings ``accept_update`` needs)
is kept in :class:`~cda.service.state.ServiceState`.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cda.actions.audit import file_meta_digest
from cda.actions.bindings import BoundOutput, lock_of, update_available
from cda.actions.event_chain import events_head
from cda.actions.receipts import ReceiptLog
from cda.actions.reflection import ReflectionStore
from cda.actions.runner import action_id_of
from cda.actions.signing import head_path, load_signer, read_head, write_head
from cda.actions.store_file import read_snapshot
from cda.adapters.action_entry import AuditLogError, _check_signed_head, refuse_lost_log
from cda.adapters.event_store import EventStore, check_event_file
from cda.contracts.abstain import AbstainThresholds
from cda.contracts.action import CDAInputs, NextTestSuggestion
from cda.contracts.deadline import CancelToken, cancel_scope
from cda.contracts.events import (
    ActionCheckpoint,
    ActionCompleted,
    ActionEvent,
    ActionFailed,
    ActionLinked,
    ActionNotice,
    ActionPartial,
    ActionStarted,
    ActionWaitingUser,
)
from cda.contracts.metrics import ApprovalWait
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.contracts.refs import ArtifactRef
from cda.errors import CDAError
from cda.service.auth import OPEN, AuthConfig, Principal
from cda.service.escalation import decide
from cda.service.protocol import ActionGetResult, Escalation, RefreshResult, StartResult, SubActionSpec
from cda.service.providers import Provider, ProviderError
from cda.service.scheduler import DRAFT, REST, StageScheduler, Ticket, is_draft
from cda.service.sqlite_writes import relax_fsync, share_write_lock
from cda.service.state import ServiceState, check_state
from cda.service.store import TERMINAL, StoredEvent, last_events, read_stream, started_without_events
from cda.service.streams import Hub
from cda.service.workers import RunnerJob, RunnerPool, RunnerStopped, run_job

__all__ = ["ActionManager", "EdgeError", "EGRESS_RANK", "MAX_THREADS", "check_signable", "is_draft", "relax_fsync",
           "share_write_lock"]

EGRESS_RANK = {"local": 0, "partner": 1, "external": 2}
RERUNNABLE = frozenset({"ActionInterrupted", "ActionCancelled"})  # ended so: a new start runs a new attempt

MAX_THREADS = 256
"""Actions that may hold a thread at once (running, or parked by the scheduler after their draft);
more wait for a thread in submission order. A parked thread costs its stack, not CPU."""

PARTNER_WALL_S = 300.0
"""A partner's action runs at most this long (``cda serve --partner-wall``): its ``budgets.wall``
is lowered to it, and a run still going at the cap is cancelled (the solver interrupted)."""

STOP_GRACE_S = 10.0
"""After a cancel (or the server stopping) the run has this long to end with what it found; past
it, its next event ends it without (``action_failed``, ``ActionCancelled``/``ActionInterrupted``)."""

SHUTDOWN_WAIT_S = 3.0
"""How long stopping the server waits for its runs to end after their solvers were interrupted."""

_STOPS = {  # the run's stop reason -> (what its token says, the token's kind)
    "ActionCancelled": ("cancelled by the client (actions.cancel)", "cancelled"),
    "ActionInterrupted": ("interrupted: the server is stopping", "interrupted"),
}


class EdgeError(CDAError, ValueError):
    """A call the server refuses: ``code`` (forbidden, not_found, conflict) and the ``path`` at fault."""

    def __init__(self, code: str, message: str, path: list[str | int] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path or []


class _Stop(BaseException):  # noqa: N818 - not an error: unwinds the runner at its next event
    """Raised inside the run's event callback to end it (cancel, server stopping)."""


@dataclass
class _Run:
    action_id: str
    owner: Principal
    inputs: CDAInputs
    status: str = "running"
    needed: list[str] = field(default_factory=list)
    granted: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    stop: str | None = None  # "ActionCancelled" | "ActionInterrupted" once asked to stop
    stopped_at: float | None = None  # time.monotonic() of the stop
    token: CancelToken = field(default_factory=CancelToken)  # the run's deadlines and solvers stop with it
    next_seq: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    gate: threading.Lock = field(default_factory=threading.Lock)  # approvals and cancel, one at a time
    settled: threading.Event = field(default_factory=threading.Event)  # its thread is done (trace filed)
    bound: list[BoundOutput] = field(default_factory=list)
    notify: list[SubActionSpec] = field(default_factory=list)
    revision: int = 1  # > 1 for a structure revision (an accepted update)
    supersedes: str | None = None  # the plan bundle a structure revision supersedes
    attempt: int = 1  # the attempt the service began (its events and receipts are filed under it)
    events: list[ActionEvent] = field(default_factory=list)  # what this attempt streamed so far
    waiting_since: float | None = None  # time.monotonic() when the action began to wait for approvals
    waits: list[ApprovalWait] = field(default_factory=list)  # each decision and how long it took (§10)

    ticket: Ticket | None = None  # its place with the scheduler, once submitted to run
    lane: int = 0  # which scheduler (and runner process, with --processes) runs it



class ActionManager:
    """Starts, cancels, approves and describes actions; owns the writers of the server's file."""

    def __init__(self, db: Path, hub: Hub, *, workers: int = 2, egress_cap: str = "local",
                 providers: dict[str, Provider] | None = None, fsync_each_commit: bool = False,
                 self_approval: bool = True, auth: AuthConfig = OPEN, processes: int = 0,
                 partner_wall: float | None = PARTNER_WALL_S, partner_slots: int | None = None) -> None:
        self.db = db
        self.hub = hub
        self.egress_cap = egress_cap
        self.events = EventStore(db)
        self.log = ReceiptLog(db)
        self.reflection = ReflectionStore(db, self.log)
        if not fsync_each_commit:
            for store in (self.events, self.log, self.reflection):
                relax_fsync(store)
        share_write_lock(self.events, self.log, self.reflection)
        # in-process: one scheduler with `workers` slots; with runner processes: `workers` slots in
        # each (two runs per process keep it busy while the other waits for the server's answer)
        self.runners = RunnerPool(processes, db, fsync=fsync_each_commit) if processes else None
        # fairness: on a server with --auth a partner holds at most partner_slots of each scheduler's
        # slots (default half, at least one); an open server's clients are all one partner
        per_owner = None if auth.open else (partner_slots or max(1, workers // 2))
        self.schedulers = [StageScheduler(workers, per_owner) for _ in range(max(1, processes))]
        self.partner_wall = partner_wall
        self.scheduler = self.schedulers[0]
        self._lanes = 0
        self.pool = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="cda-action")
        self.runs: dict[str, _Run] = {}
        self.lock = threading.Lock()
        self.thresholds = AbstainThresholds.from_env(os.environ)
        self.providers = providers or {}
        self.self_approval = self_approval  # False with --auth: only the internal profile grants
        self.open = auth.open  # every client is the same anonymous partner: an action of unknown owner is theirs
        self.signer = load_signer()  # the key `cda run` signs with ($CDA_KEY_DIR)
        self.sign_lock = threading.Lock()
        self.tampered = False  # set once a signing found the log rewritten: nothing is signed after that
        self.stuck = 0  # runs still going when shutdown stopped waiting for them
        with self.sign_lock:
            self._check_log()  # never sign on top of a rewritten log (before the state file is touched)
        known = [Principal("anonymous", "partner")] if auth.open else [who for _, who in auth.entries]
        self.state = ServiceState(db, known)  # owners, sub-action revisions, consumers: survive a restart

    # -- receipts and events ---------------------------------------------------------------
    def receipt(self, action_id: str, name: str, inputs: dict[str, Any], result: dict[str, Any],
                status: str = "ok", attempt: int | None = None) -> None:
        """One receipt of the service's own (approvals, cancels, refusals, interruptions), filed
        under ``attempt`` when it concerns one run of the action."""
        self.log.append(Receipt(action_id=action_id, seq=self.log.count(action_id), kind="action", name=name,
                                inputs_hash=sha256_hex(canonical_json(inputs)), result=result,
                                status=status, attempt=attempt))  # type: ignore[arg-type]

    def _begin(self, action_id: str, name: str, inputs: dict[str, Any], result: dict[str, Any]) -> int:
        """Begin a new attempt of ``action_id`` with the service's receipt ``name``; its number."""
        seq = self.log.count(action_id)
        attempt, _ = self.log.begin_attempt(action_id, lambda n: Receipt(
            action_id=action_id, seq=seq, kind="action", name=name, inputs_hash=sha256_hex(canonical_json(inputs)),
            result=result, attempt=n))
        return attempt

    def _close(self, run: _Run, status: str) -> None:
        """End an attempt the runner did not end (a cancel, a short escalation, a sub-action
        revision): its ``action.end`` vouches for the events it streamed; then sign."""
        self.receipt(run.action_id, "action.end", {"attempt": run.attempt}, {
            "status": status, "events": len(run.events), "events_head": events_head(run.events)},
            attempt=run.attempt)
        self._sign(run.action_id, run.attempt, run.events)

    def _sign(self, action_id: str, attempt: int, events: Sequence[ActionEvent]) -> None:
        """Sign the log's head after an attempt ended (``cda receipts verify`` wants every
        ``action.end`` under a signature); one at a time, so the last head written is the latest."""
        with self.sign_lock:
            if not self._signable(action_id, attempt):
                return
            head, count = self.log.tip()
            write_head(head_path(self.db), self.signer.sign_head(
                head, count, action_id, attempt, "end", len(events), events_head(events, timeless=False),
                file_meta_digest(self.db)))

    def _check_log(self, recorded: bool = True) -> None:
        """:func:`~cda.adapters.action_entry._check_signed_head` on the open log (AuditLogError)."""
        _check_signed_head(self.db, self.log, self.signer.public_key, recorded=recorded)

    def _signable(self, action_id: str, attempt: int) -> bool:
        """Under ``sign_lock``, before a head is signed: whether the log still holds the head signed
        last (and CDA's schema). A server lives for days; a log rewritten meanwhile (receipts
        deleted past the triggers) must not get a signature over the rewrite. If it was, nothing is
        signed, from now on, and an ``action.tampered`` receipt records it, as ``cda run`` does:
        ``cda receipts verify`` reports it and the next start of a server or a run refuses the log."""
        if self.tampered:
            return False
        try:  # recorded tampering was checked at start; since then the server tracks its own (7 ms, not 29 ms, at 30k receipts)
            self._check_log(recorded=False)
        except AuditLogError as exc:
            self.tampered = True
            self.receipt(action_id, "action.tampered", {"attempt": attempt}, {"problems": [str(exc)]},
                         status="failed", attempt=attempt)
            print(f"cda serve: {exc}; no head is signed any more", file=sys.stderr, flush=True)
            return False
        return True

    def _emit(self, run: _Run, event: ActionEvent) -> None:
        outputs = getattr(event, "outputs", None)
        if run.bound and event.type in TERMINAL and outputs is not None:  # before a client sees the end:
            self._file_consumer(run, outputs)  # it may refresh a bound output at once (a runner process
            # returns its result later: its consumer was missing from update_available)
        with run.lock:
            event = event.model_copy(update={"seq": run.next_seq, "attempt": run.attempt})
            run.next_seq += 1
            body = self.events.store(event)  # its canonical JSON, stored and now streamed
            run.events.append(event)
        self.hub.publish_threadsafe(run.action_id, StoredEvent(event.seq, event.type, body, run.attempt))
        if run.ticket is not None and run.ticket.stage == DRAFT and is_draft(event):
            self.schedulers[run.lane].advance(run.ticket, REST)  # the draft is out: the others' drafts go first
        if run.stop is not None and event.type not in TERMINAL and self._overdue(run):
            raise _Stop(run.stop)

    def _file_consumer(self, run: _Run, outputs: Any) -> None:
        """Remember that ``run`` bound its outputs (``accept_update``, ``update_available``), also after a restart."""
        self.state.put_consumer(run.action_id, run.inputs, outputs.revision, outputs.plan_bundle_id, run.bound)
        for b in run.bound:
            self.state.put_revision(b)

    def _terminal(self, run: _Run, error: str, error_type: str) -> None:
        run.stop = None
        self._emit(run, ActionFailed(action_id=run.action_id, seq=0, error=error, error_type=error_type))

    # -- the methods ------------------------------------------------------------------------
    def start(self, who: Principal, inputs: CDAInputs, subactions: list[SubActionSpec] | None = None,
              escalation: Escalation | None = None) -> StartResult:
        if who.profile != "internal":
            if inputs.ken is not None and inputs.ken.path is not None:
                raise EdgeError("forbidden", "a partner cannot name a file on the server; give the Ken graph inline",
                                ["params", "inputs", "ken", "path"])
            if inputs.functions:
                raise EdgeError("forbidden", "function checks run code on the server: internal profile only",
                                ["params", "inputs", "functions"])
        cup = None
        if escalation is not None:
            cup = decide(escalation, inputs.risk_class)
            if not cup.escalate:
                raise EdgeError("conflict", f"not escalated: {cup.reason}", ["params", "escalation", "signals"])
        specs = list(subactions or [])
        early = [(i, spec, self._spawn(spec, i, who)) for i, spec in enumerate(specs) if spec.edge != "notify"]
        bound = [out for _, spec, out in early if spec.edge == "bind"]
        action_id = self._id_of(who, inputs, bound)
        with self.lock:
            if action_id in self.runs:
                return StartResult(action_id=action_id, topic=f"actions/{action_id}",
                                   status=self.runs[action_id].status, existing=True)
            stored = read_stream(self.db, action_id, None)
            if stored and not (self._rerunnable(stored[-1]) and self.visible(who, action_id)):
                return StartResult(action_id=action_id, topic=f"actions/{action_id}",
                                   status=self.get(action_id).status, existing=True)
            run = _Run(action_id, who, inputs, bound=bound, notify=[s for s in specs if s.edge == "notify"])
            self.runs[action_id] = run
            self.hub.live.add(action_id)
        self.state.own(action_id, who)  # before any receipt: a crash never leaves a started action ownerless
        run.attempt = self._begin(action_id, "service.start", {"principal": who.name, "profile": who.profile},
                                  {"inputs_sha256": sha256_hex(canonical_json(inputs.model_dump(mode="json")))})
        for _, spec, out in early:
            if spec.edge != "bind":  # the runner links (and locks) what it binds
                self._emit(run, ActionLinked(action_id=action_id, seq=0, linked_action_id=out.action_id,
                                             ability=spec.ability, edge=spec.edge))
        linked = [f"{out.action_id}.r{out.revision}" for _, _, out in early]
        if cup is not None:
            self.receipt(action_id, "cup.escalate", {"signals": cup.fired, "risk_class": inputs.risk_class},
                         {"reason": cup.reason, "wall": cup.wall, "short": cup.short}, attempt=run.attempt)
            if cup.short:
                self._short(run, cup.reason)
                return StartResult(action_id=action_id, topic=f"actions/{action_id}", status="partial", linked=linked)
            if cup.wall is not None and (inputs.budgets.wall is None or inputs.budgets.wall > cup.wall):
                run.inputs = inputs.model_copy(update={"budgets": inputs.budgets.model_copy(update={"wall": cup.wall})})
        if EGRESS_RANK[inputs.policies.egress] > EGRESS_RANK[self.egress_cap]:
            run.needed.append(f"egress:{inputs.policies.egress}")
        if inputs.policies.pii_posture == "consent":
            run.needed.append("pii:consent")
        if run.needed:
            run.status = "waiting_user"
            run.waiting_since = time.monotonic()
            self._emit(run, ActionWaitingUser(
                action_id=action_id, seq=0, approvals_needed=list(run.needed),
                reason=f"the server's egress cap is '{self.egress_cap}'; approve or deny: {', '.join(run.needed)}"))
        else:
            self._submit(run)
        return StartResult(action_id=action_id, topic=f"actions/{action_id}", status=run.status, linked=linked)

    def _scope(self, who: Principal) -> str:
        """What makes ``who``'s content-addressed ids their own: on a server with ``--auth`` a
        partner's action ids and sub-action bases are seeded with the partner's name too, so two
        partners sending the same inputs (or binding the same source) get two actions, and neither
        can tell from an answer that the other's exists. Empty (the ids ``cda run`` gives) for the
        internal profile and on an open server (one anonymous partner)."""
        return "" if self.open or who.profile == "internal" else f"partner:{who.name}\n"

    def _id_of(self, who: Principal, inputs: CDAInputs, bound: Sequence[BoundOutput]) -> str:
        content = action_id_of(inputs, bound=bound)
        scope = self._scope(who)
        return content if not scope else "cda-" + sha256_hex(scope + content)[:16]

    @staticmethod
    def _rerunnable(last: StoredEvent) -> bool:
        """The latest attempt ended interrupted or cancelled: starting the action again runs it again."""
        return _stopped(last.type, _json(last.data)) is not None

    def _short(self, run: _Run, reason: str) -> None:
        """Escalated with less wall time than CDA reserves: a terminal partial at once (spec §9)."""
        caveat = f"escalation with too little time: {reason}; no search ran"
        self._emit(run, ActionStarted(action_id=run.action_id, seq=0))
        self._finish_with(run, ActionPartial(action_id=run.action_id, seq=0, caveats=[caveat], next_tests=[
            NextTestSuggestion(question="Escalate again with at least 20 s of wall time left",
                               suggested_ability="default")]))

    def _finish_with(self, run: _Run, event: ActionEvent) -> None:
        self._emit(run, event)
        self._close(run, "partial")
        with self.lock:
            self.runs.pop(run.action_id, None)

    # -- sub-actions (spec §4): pluggable local providers, bind => lock, update_available --------
    def _spawn(self, spec: SubActionSpec, index: int, who: Principal) -> BoundOutput:
        provider = self.providers.get(spec.ability)
        where: list[str | int] = ["params", "subactions", index, "source"]
        if provider is None:
            raise EdgeError("forbidden", f"this server has no provider for {spec.ability!r} sub-actions "
                            "(cda serve --providers DIR)", ["params", "subactions", index, "ability"])
        try:
            text = provider.produce(spec.source)
        except ProviderError as exc:
            raise EdgeError("invalid_params", str(exc), where) from None
        base = f"{spec.ability}-{sha256_hex(self._scope(who) + spec.source)[:12]}"
        self.state.own(base, who)
        self.state.put_source(base, spec.ability, spec.source)
        with self.lock:
            return self._revision(base, spec.ability, text)[0]

    def _revision(self, base: str, ability: str, text: str) -> tuple[BoundOutput, bool]:
        """The revision of ``base`` holding ``text``: an existing one, or a new one with its stream."""
        digest = sha256_hex(text)
        revision = 1
        while True:
            rev_id = f"{base}.r{revision}"
            known = self.state.revision(rev_id) or self._legacy_revision(base, ability, revision)
            if known is None:
                break
            if sha256_hex(known.artifact.text or "") == digest:
                return known, False
            revision += 1
        out = BoundOutput(base, ability, revision, ArtifactRef(artifact_id=f"{base}:output", text=text))  # type: ignore[arg-type]
        self.state.put_revision(out)
        stream = _Run(rev_id, Principal("server", "internal"), CDAInputs(problem=f"{ability} sub-action"))
        stream.attempt = self._begin(rev_id, "subaction.revision", {"base": base, "revision": revision},
                                     {"sha256": digest})
        self._emit(stream, ActionStarted(action_id=rev_id, seq=0, ability=ability, inputs_hash=sha256_hex(base)))
        offered_to = []
        for consumer in self.state.consumers_of(base):
            held = self.state.consumer(consumer)
            if held is not None and update_available([lock_of(b) for b in held.bound], out):
                offered_to.append(consumer)
        self._emit(stream, ActionCheckpoint(action_id=rev_id, seq=0, kind="context_delta", payload={
            "artifact_id": out.artifact.artifact_id, "revision": revision, "sha256": digest, "text": text,
            **({"update_available": {"consumers": offered_to}} if offered_to else {})}))
        for consumer in offered_to:
            self.state.offer(consumer, rev_id)
            self.receipt(consumer, "bind.update_available", {"sub_action": rev_id}, {"sha256": digest})
        self._emit(stream, ActionCompleted(action_id=rev_id, seq=0))
        self._close(stream, "completed")
        return out, True

    def _legacy_revision(self, base: str, ability: str, revision: int) -> BoundOutput | None:
        """A revision a server before the state file streamed (its text is in its stream), recorded now."""
        stored = read_stream(self.db, f"{base}.r{revision}", None)
        if not stored:
            return None
        payload = _json(stored[1].data).get("payload", {}) if len(stored) > 1 else {}
        out = BoundOutput(base, ability, revision,  # type: ignore[arg-type]
                          ArtifactRef(artifact_id=f"{base}:output", text=str(payload.get("text", ""))))
        self.state.put_revision(out)
        return out

    def _legacy_source(self, base: str) -> tuple[str, str] | None:
        """The provider and source of a sub-action a server before the state file spawned (that
        server kept them in memory; its stream ``<base>.r1`` is in the file): the base is the
        ability and the first 12 hex digits of the source name's SHA-256, matched against the
        sources the provider lists now
        (:meth:`~cda.service.providers.FolderProvider.sources`), and recorded."""
        ability, _, digest = base.rpartition("-")
        listing = getattr(self.providers.get(ability), "sources", None)
        if listing is None or not read_stream(self.db, f"{base}.r1", None, 1):
            return None
        for source in listing():
            if sha256_hex(source)[:12] == digest:
                self.state.put_source(base, ability, source)
                return ability, source
        return None

    def refresh(self, who: Principal, action_id: str) -> RefreshResult:
        """Ask the provider again; new content is a new revision (update_available to its consumers)."""
        base = action_id.rsplit(".r", 1)[0]
        known = self.state.source(base) or self._legacy_source(base)
        if known is None or not self.visible(who, base):
            raise EdgeError("not_found", f"no sub-action {action_id} on this server", ["params", "action_id"])
        ability, source = known
        try:
            text = self.providers[ability].produce(source)
        except (KeyError, ProviderError) as exc:
            message = str(exc) if isinstance(exc, ProviderError) else f"this server has no {ability!r} provider now"
            raise EdgeError("conflict", message, ["params", "action_id"]) from None
        with self.lock:
            out, new = self._revision(base, ability, text)
        if not new:
            raise EdgeError("conflict", f"{action_id}: the provider's output is unchanged (no new revision)",
                            ["params", "action_id"])
        rev_id = f"{base}.r{out.revision}"
        return RefreshResult(action_id=rev_id, revision=out.revision, sha256=sha256_hex(text),
                             updates_for=[c for c in self.state.consumers_of(base)
                                          if rev_id in self.state.offers(c) and self.visible(who, c)])

    def accept_update(self, who: Principal, action_id: str, update: str) -> StartResult:
        """Accept a newer revision of a bound output: a structure revision, a new action."""
        held = self.state.consumer(action_id)
        if held is None or not self.visible(who, action_id):
            raise EdgeError("not_found", f"no finished action {action_id} with bound outputs on this server",
                            ["params", "action_id"])
        offered = self.state.revision(update)
        if offered is None or not update_available([lock_of(b) for b in held.bound], offered):
            raise EdgeError("conflict", f"{update} is not a newer revision of anything {action_id} bound",
                            ["params", "update"])
        bound = [offered if b.action_id == offered.action_id else b for b in held.bound]
        new_id = self._id_of(who, held.inputs, bound)
        run = _Run(new_id, who, held.inputs, bound=bound, revision=held.revision + 1, supersedes=held.plan_bundle_id)
        with self.lock:
            existing = bool(new_id in self.runs or read_stream(self.db, new_id, None))
            if not existing:
                self.runs[new_id] = run
                self.hub.live.add(new_id)
        if existing:  # accepted before: its state now (it may have finished), as start answers
            return StartResult(action_id=new_id, topic=f"actions/{new_id}", status=self.get(new_id).status,
                               existing=True, revision=held.revision + 1)
        self.state.own(new_id, who)
        run.attempt = self._begin(new_id, "service.start", {"principal": who.name, "profile": who.profile},
                                  {"inputs_sha256": sha256_hex(canonical_json(held.inputs.model_dump(mode="json"))),
                                   "revision_of": action_id})
        self.receipt(action_id, "bind.accept", {"update": update, "principal": who.name}, {"revision_action": new_id})
        self._submit(run)
        return StartResult(action_id=new_id, topic=f"actions/{new_id}", status="running", revision=held.revision + 1)

    def decide(self, who: Principal, action_id: str, approval: str, grant: bool, reason: str) -> ActionGetResult:
        run = self._own(who, action_id)
        if grant and not self.self_approval and who.profile != "internal":
            raise EdgeError("forbidden", "an approval comes from an internal reviewer on a server with --auth "
                            "(a partner may deny)", ["method"])
        with run.gate:  # two approvals (or an approval and a cancel) at once: one submits, at most
            if run.status != "waiting_user" or approval not in run.needed:
                raise EdgeError("conflict", f"action {action_id} is not waiting for {approval!r} "
                                f"(waiting for: {', '.join(run.needed) or 'nothing'})", ["params", "approval"])
            (run.granted if grant else run.denied).add(approval)
            run.needed.remove(approval)
            waited = time.monotonic() - (run.waiting_since if run.waiting_since is not None else time.monotonic())
            run.waits.append(ApprovalWait(approval=approval, granted=grant,
                                          waited_us=max(0, round(waited * 1_000_000))))
            self.receipt(action_id, "approval.granted" if grant else "approval.denied",
                         {"approval": approval, "principal": who.name}, {"reason": reason},
                         status="ok" if grant else "denied", attempt=run.attempt)
            if not run.needed:
                run.status = "running"
                self._submit(run)
        return self.get(action_id)

    def cancel(self, who: Principal, action_id: str) -> ActionGetResult:
        run = self._own(who, action_id)
        with run.gate:
            self.receipt(action_id, "service.cancel", {"principal": who.name}, {"status_then": run.status},
                         attempt=run.attempt)
            if run.status == "waiting_user":
                run.status = "failed"  # an approval racing this cancel finds nothing to approve
                self._finish(run, "cancelled by the client", "ActionCancelled")
            else:
                self._stop(run, "ActionCancelled")
        return self.get(action_id)

    def _stop(self, run: _Run, reason: str) -> None:
        """Stop ``run``: its token is cancelled, which interrupts its solver and expires its
        deadlines, so it ends within moments with what it found (``action_partial``, ``stopped``);
        a runner process is told at once. A run that has not ended :data:`STOP_GRACE_S` later
        (a call that reads no deadline) is ended at its next event without its findings."""
        if run.stop is None:
            run.stop, run.stopped_at = reason, time.monotonic()
        run.token.cancel(*_STOPS[reason])
        if self.runners is not None:
            self.runners.stop(run.lane, run.action_id, run.attempt, *_STOPS[reason])

    @staticmethod
    def _overdue(run: _Run) -> bool:
        return run.stopped_at is not None and time.monotonic() - run.stopped_at > STOP_GRACE_S

    def _own(self, who: Principal, action_id: str) -> _Run:
        run = self.runs.get(action_id)
        if run is None or not self.visible(who, action_id):
            raise EdgeError("not_found", f"no running action {action_id} on this server", ["params", "action_id"])
        return run

    def visible(self, who: Principal, key: str) -> bool:
        """Whether ``who`` may see ``key`` (an action, a sub-action's base or revision): its starter
        and the internal profile. To anyone else it is answered as an unknown id would be (its
        existence is not disclosed). Owners are kept in the state file, so this holds after a
        restart; an action of no recorded owner (written by ``cda run`` into the same file, or
        started by a server that no known principal matches) is the internal profile's, or, on
        an open server, the one anonymous partner's."""
        if who.profile == "internal":
            return True
        owner = self.state.owner(key)
        if owner is None and key in self.runs:
            owner = self.runs[key].owner.name
        if owner is None and ".r" in key:  # a sub-action revision: its base's starter
            owner = self.state.owner(key.rsplit(".r", 1)[0])
        if owner is None:
            return self.open
        return owner == who.name

    def get(self, action_id: str, who: Principal | None = None) -> ActionGetResult:
        events = read_stream(self.db, action_id, None)
        run = self.runs.get(action_id)
        if (not events and run is None) or (who is not None and not self.visible(who, action_id)):
            raise EdgeError("not_found", f"no action {action_id} in this store", ["params", "action_id"])
        out: dict[str, Any] = {"action_id": action_id, "status": "running",
                               "updates_available": self.state.offers(action_id)}
        if events:
            out["last_event_id"] = events[-1].seq if events[-1].attempt == 1 else events[-1].sse_id
        for e in events:
            if e.type == "action_checkpoint":
                body = _json(e.data)
                if body.get("kind") == "boundary_summary":
                    out["boundary_summary"] = body.get("payload", {}).get("text")
        if events and events[-1].type in TERMINAL:  # stored: final even while its thread winds down
            body = _json(events[-1].data)
            outputs = body.get("outputs") or {}
            stopped = _stopped(events[-1].type, body)
            out["status"] = stopped or outputs.get("status") or events[-1].type.removeprefix("action_")
            for key in ("revision", "summary_artifact_id", "plan_bundle_id", "evidence_bundle_id"):
                out[key] = outputs.get(key)
        elif run is not None:
            out["status"] = run.status
            out["approvals_needed"] = list(run.needed)
        return ActionGetResult.model_validate(out)

    # -- running ----------------------------------------------------------------------------
    def _submit(self, run: _Run) -> None:
        """Queue ``run``: its place (stage DRAFT, the next arrival) is taken now, its thread runs
        it once the scheduler grants a slot."""
        with self.lock:  # the lanes (runner processes) take the actions in turn
            run.lane, self._lanes = self._lanes % len(self.schedulers), self._lanes + 1
        limited = run.owner.profile != "internal" and not self.open  # an open server's clients are one partner
        run.ticket = self.schedulers[run.lane].ticket(run.owner.name if limited else None)
        self.pool.submit(self._execute, run)

    def _execute(self, run: _Run) -> None:
        assert run.ticket is not None
        scheduler = self.schedulers[run.lane]
        scheduler.acquire(run.ticket)
        cap = None
        if run.owner.profile != "internal" and self.partner_wall is not None:  # the budget's backstop
            cap = threading.Timer(self.partner_wall, run.token.cancel, args=(
                f"the partner wall cap of {self.partner_wall:g} s was reached (cda serve --partner-wall)", "timeout"))
            cap.daemon = True
            cap.start()
        try:
            self._run(run)
        finally:
            if cap is not None:
                cap.cancel()
            scheduler.release(run.ticket)

    def _capped(self, run: _Run, inputs: CDAInputs) -> CDAInputs:
        """A partner's inputs with ``budgets.wall`` at most the server's partner wall cap (a receipt
        says so when it lowered it): the run's own budget, ladder and partial then keep the cap."""
        cap, wall = self.partner_wall, inputs.budgets.wall
        if run.owner.profile == "internal" or cap is None or (wall is not None and wall <= cap):
            return inputs
        self.receipt(run.action_id, "service.wall_cap", {"principal": run.owner.name},
                     {"wall": cap, "asked": wall}, attempt=run.attempt)
        return inputs.model_copy(update={"budgets": inputs.budgets.model_copy(update={"wall": cap})})

    def _run(self, run: _Run) -> None:
        inputs = self._capped(run, run.inputs)
        if run.granted or run.denied:  # approvals-as-input: the decisions are part of what the run reads
            inputs = inputs.model_copy(update={"policies": inputs.policies.model_copy(update={
                "approvals": sorted({*inputs.policies.approvals, *run.granted})})})
        if run.denied:
            inputs = inputs.model_copy(update={"policies": inputs.policies.model_copy(update={
                "egress": self.egress_cap if any(a.startswith("egress:") for a in run.denied)
                else inputs.policies.egress,
                "pii_posture": "on" if "pii:consent" in run.denied else inputs.policies.pii_posture})})
            self._emit(run, ActionNotice(action_id=run.action_id, seq=0, level="warning", message=(
                f"denied: {', '.join(sorted(run.denied))}; the action runs within the server's caps "
                "and marks the evidence it could not get with receipt stubs")))
        try:
            if run.stop is not None:  # stopped while it waited for a slot: nothing ran, nothing to report
                raise _Stop(run.stop)
            ken, ken_path = None, None
            if inputs.ken is not None and inputs.ken.path is not None:  # internal profile only (checked at start)
                path = Path(inputs.ken.path)
                ken_path = path if path.is_absolute() else self.db.parent / path
            # the run continues the attempt the service began: after the events already streamed
            # (prelude), its receipts under that attempt (_AttemptSink), its audit over the stored events
            job = RunnerJob(run.action_id, inputs, self.db.parent, self.thresholds, list(run.bound), ken_path,
                            revision=run.revision, supersedes=run.supersedes, attempt=run.attempt,
                            prelude=list(run.events), approval_waits=list(run.waits))
            if self.runners is not None:  # in a runner process; its events come back through _emit
                try:
                    result = self.runners.run(run.lane, job, lambda e: self._emit(run, e), audit=self.events.confirm,
                                              stopping=lambda: run.stop is not None)
                except RunnerStopped:  # the child saw the stop first: the same end as in-process
                    raise _Stop(run.stop or "ActionInterrupted") from None
            else:
                if ken_path is not None:
                    from cda.ken.loaders import load_ken
                    ken = load_ken(ken_path)
                with cancel_scope(run.token):  # its deadlines and solvers stop with a cancel
                    result = run_job(job, ken, self.log, lambda e: self._emit(run, e), self.events.confirm)
            self.reflection.put(run.action_id, result.trace, attempt=result.attempt)
            self._sign(run.action_id, result.attempt, result.events)  # over the action.end and the trace's receipt
            if run.bound:  # accept_update needs these, also after a restart
                self._file_consumer(run, result.outputs)
            for i, spec in enumerate(run.notify):  # notify: told once the consumer is done
                try:
                    self._spawn(spec, i, run.owner)
                except EdgeError as exc:
                    self.receipt(run.action_id, "notify.failed", {"source": spec.source}, {"error": str(exc)},
                                 status="failed", attempt=run.attempt)
        except _Stop as stop:
            reason = "cancelled by the client" if str(stop) == "ActionCancelled" else \
                "interrupted: the server stopped while the action ran; start it again"
            self.receipt(run.action_id, "action.stopped", {"reason": str(stop)}, {}, status="failed",
                         attempt=run.attempt)
            self._terminal(run, reason, str(stop))
            self._close(run, "failed")
        except Exception as exc:  # noqa: BLE001 - a bug must still end the stream
            self.receipt(run.action_id, "action.crashed", {"error_type": type(exc).__name__}, {}, status="failed",
                         attempt=run.attempt)
            if not (run.events and run.events[-1].type in TERMINAL):  # ended already: no second terminal
                self._terminal(run, f"the action stopped on an internal error ({type(exc).__name__})",
                               "InternalError")
                self._close(run, "failed")
        finally:
            with self.lock:
                self.runs.pop(run.action_id, None)
            run.settled.set()

    def read_trace(self, action_id: str, approval: str | None, wait_s: float = 30.0) -> dict[str, Any] | None:
        """The raw trace (``reflect.trace``), once the run has filed it.

        The run's thread files the trace right after the terminal event, so a client that acts
        on that event can ask a moment too early (under load: seen in the auth test); a running
        action is waited for, at most ``wait_s``."""
        run = self.runs.get(action_id)
        if run is not None and run.status == "running":
            run.settled.wait(wait_s)
        return self.reflection.read(action_id, approval)

    def _finish(self, run: _Run, error: str, error_type: str) -> None:
        self._terminal(run, error, error_type)
        self._close(run, "failed")
        with self.lock:
            self.runs.pop(run.action_id, None)

    def recover(self) -> list[str]:
        """Mark every action the store holds unfinished as interrupted (the server restarted)."""
        marked = []
        unfinished = [(a, last.attempt, last.seq) for a, last in last_events(self.db).items()
                      if last.type not in TERMINAL]
        unfinished += [(a, attempt, -1) for a, attempt in started_without_events(self.db)]
        for action_id, attempt, last_seq in unfinished:
            if action_id in self.runs:
                continue
            run = _Run(action_id, Principal("server", "internal"), CDAInputs(problem="(interrupted)"),
                       next_seq=last_seq + 1, attempt=attempt)  # its terminal event: in the attempt it ends
            self.receipt(action_id, "action.interrupted", {"last_event_id": last_seq},
                         {"reason": "the server stopped while the action ran"}, status="failed", attempt=attempt)
            self._terminal(run, "interrupted: the server stopped while the action ran; start it again",
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

    def interrupt_all(self) -> None:
        """The server is asked to stop (SIGTERM): every running action's token is cancelled now,
        so its solver is interrupted and it ends with what it found while the server still
        drains its connections. Never blocks (called from the signal's handler)."""
        for run in list(self.runs.values()):
            if run.status != "waiting_user":
                self._stop(run, "ActionInterrupted")

    def shutdown(self, wait_s: float = SHUTDOWN_WAIT_S) -> None:
        """Stop: waiting actions end interrupted, running ones are stopped (:meth:`_stop`); wait at
        most ``wait_s`` for them, then close the store. A run still going then is in code that
        reads no deadline: :attr:`stuck` counts them and the store is left open under them (the
        process is about to exit; the next start marks them interrupted)."""
        for run in list(self.runs.values()):
            if run.status == "waiting_user":
                self._finish(run, "interrupted: the server stopped while the action waited", "ActionInterrupted")
            else:
                self._stop(run, "ActionInterrupted")
        self.pool.shutdown(wait=False, cancel_futures=False)
        end = time.monotonic() + wait_s
        for run in list(self.runs.values()):
            run.settled.wait(max(0.0, end - time.monotonic()))
        self.stuck = sum(1 for run in list(self.runs.values()) if not run.settled.is_set())
        if self.runners is not None:
            self.runners.close()
        if self.stuck:
            return
        self.state.close()
        self.reflection.close()
        self.log.close()
        self.events.close()


def check_signable(db: Path) -> None:
    """The server's pre-flight on ``db``, before anything is created or modified (a
    :class:`~cda.errors.CDAError` that says what is wrong; ``cda serve`` exits 2): the log is not
    gone or wiped under a kept signed head (the check ``cda run`` makes), it is CDA's file, the state file is the
    service's own, the signing key can be read (or made), and the log still holds the head signed
    last and CDA's schema. :class:`ActionManager` checks the log again when it opens it."""
    refuse_lost_log(db)  # before anything is created: a new empty log beside a kept head buries evidence
    if db.exists():
        check_event_file(db)  # CDA's own file (a foreign one is never modified), read without a trace
    check_state(db)  # the service's own state file, of a version this CDA reads, or refused untouched
    if not db.exists():
        return
    signer = load_signer()
    log = ReceiptLog(db)
    try:
        _check_signed_head(db, log, signer.public_key)
    finally:
        log.close()



def _stopped(event_type: str, body: dict[str, Any]) -> str | None:
    """``"cancelled"`` or ``"interrupted"`` when a terminal event ends a stopped attempt: one
    that ended with its findings (``action_partial`` with ``stopped``) or without them
    (``action_failed``, the error types of :data:`RERUNNABLE`)."""
    if event_type == "action_partial" and body.get("stopped") in ("cancelled", "interrupted"):
        return str(body["stopped"])
    if event_type == "action_failed" and body.get("error_type") in RERUNNABLE:
        return "interrupted" if body["error_type"] == "ActionInterrupted" else "cancelled"
    return None


def _json(text: str) -> dict[str, Any]:
    import json

    value = json.loads(text)
    return value if isinstance(value, dict) else {}
