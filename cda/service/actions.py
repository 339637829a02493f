"""Actions the server runs: started over the ToolBus, run off the event loop, streamed as they go.

:class:`ActionManager` is what the ToolBus calls (``actions.start|cancel|approve|deny|get``,
``actions.refresh``, ``actions.accept_update``, ``reflect.trace``); it keeps the actions alive
in memory by id and composes four parts, one module each (docs/service.md, "How the server runs
an action"):

* :mod:`~cda.service.attempts` — the writers of the server's file, each attempt begun, vouched
  for, signed, and the recovery of attempts a crash cut off;
* :mod:`~cda.service.approvals` — what an action waits for (egress above the cap, PII consent),
  the decisions, and what the run then reads (approvals-as-input);
* :mod:`~cda.service.scheduling` — threads, slots and runner processes, the per-partner limit
  and wall cap, stops (a cancel interrupts the run's solver: it ends with what it found);
* :mod:`~cda.service.revisions` — sub-actions, their revisions, bind ⇒ lock, update_available.

Who may do what is not decided here: :mod:`cda.operations`' gate decides it for every door before
a method runs (docs/service.md, "Who may do what"); a run then holds its caller's
:class:`~cda.access.Access` (what it may touch) in its thread.

*Restarts*: starting an interrupted or cancelled action again runs a new attempt of it. *State
across restarts* (owners, sub-action revisions, the bindings ``accept_update`` needs) is kept in
:class:`~cda.service.state.ServiceState`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cda.access import EGRESS_RANK, granted
from cda.actions.bindings import BoundOutput, with_bindings
from cda.actions.runner import action_id_of
from cda.adapters.auth import OPEN, AuthConfig, Principal
from cda.contracts.abstain import AbstainThresholds
from cda.contracts.action import CDAInputs, NextTestSuggestion
from cda.contracts.deadline import cancel_scope
from cda.contracts.events import ActionEvent, ActionLinked, ActionNotice, ActionPartial, ActionStarted
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.service.approvals import Approvals
from cda.service.attempts import Attempts, check_signable
from cda.service.escalation import decide
from cda.service.event_reads import TERMINAL, StoredEvent, ended, read_stream
from cda.service.live import EdgeError, LiveAction, Stop, json_object, stopped_as
from cda.service.protocol import ActionGetResult, Escalation, RefreshResult, StartResult, SubActionSpec
from cda.service.providers import Provider
from cda.service.revisions import Revisions
from cda.service.scheduler import is_draft
from cda.service.scheduling import MAX_THREADS, PARTNER_WALL_S, SHUTDOWN_WAIT_S, Scheduling
from cda.service.sqlite_writes import relax_fsync, share_write_lock
from cda.service.state import ServiceState
from cda.service.streams import Hub
from cda.service.workers import RunnerJob, RunnerStopped, run_job
from cda.store import Durability

__all__ = ["ActionManager", "EdgeError", "EGRESS_RANK", "MAX_THREADS", "check_signable", "is_draft", "relax_fsync",
           "share_write_lock"]


class ActionManager:
    """Starts, cancels, approves and describes actions, over the four parts named in the module's docstring."""

    def __init__(self, db: Path, hub: Hub, *, workers: int = 2, egress_cap: str = "local",
                 providers: dict[str, Provider] | None = None, fsync_each_commit: bool = False,
                 self_approval: bool = True, auth: AuthConfig = OPEN, processes: int = 0,
                 partner_wall: float | None = PARTNER_WALL_S, partner_slots: int | None = None,
                 legacy_aliases: bool = False) -> None:
        self.db = db
        self.legacy_aliases = legacy_aliases  # spec §13 (cda serve --legacy-aliases): work_unit_id accepted
        self.hub = hub
        self.open = auth.open  # every client is the same anonymous partner: an action of unknown owner is theirs
        self.attempts = Attempts(db, hub, fsync_each_commit=fsync_each_commit)
        self.events, self.log, self.reflection = self.attempts.events, self.attempts.log, self.attempts.reflection
        self.scheduling = Scheduling(db, self.attempts, workers=workers, processes=processes,
                                     fsync_each_commit=fsync_each_commit, open_server=auth.open,
                                     partner_wall=partner_wall, partner_slots=partner_slots)
        self.scheduler = self.scheduling.scheduler
        self.egress_cap = egress_cap
        self.approvals = Approvals(self.attempts, egress_cap)
        self.self_approval = self_approval  # an open server's one client approves its own (its principal says so)
        known = [Principal("anonymous", "partner")] if auth.open else [who for _, who in auth.entries]
        self.state = ServiceState(db, known,  # owners, sub-action revisions, consumers: survive a restart
                                  durability=Durability.FULL if fsync_each_commit else Durability.NORMAL)
        self.revisions = Revisions(self.attempts, self.state, providers or {})
        self.runs: dict[str, LiveAction] = {}
        self.lock = threading.Lock()
        self.thresholds = AbstainThresholds.from_env(os.environ)
        self.stuck = 0  # runs still going when shutdown stopped waiting for them

    def receipt(self, action_id: str, name: str, inputs: dict[str, Any], result: dict[str, Any],
                status: str = "ok", attempt: int | None = None) -> None:
        """One receipt of the service's own (:meth:`~cda.service.attempts.Attempts.receipt`)."""
        self.attempts.receipt(action_id, name, inputs, result, status, attempt)

    def _emit(self, run: LiveAction, event: ActionEvent) -> None:
        """An event of ``run``'s attempt: its consumer filed first when it ends one that bound
        outputs, then stored and streamed, then what it means for the run's slot and stop."""
        outputs = getattr(event, "outputs", None)
        if run.bound and event.type in TERMINAL and outputs is not None:  # before a client sees the end:
            self.revisions.file_consumer(run, outputs)  # it may refresh a bound output at once (a runner
            # process returns its result later: its consumer was missing from update_available)
        event = self.attempts.record(run, event)
        self.scheduling.after_event(run, event)

    # -- the methods ------------------------------------------------------------------------
    def start(self, who: Principal, inputs: CDAInputs, subactions: list[SubActionSpec] | None = None,
              escalation: Escalation | None = None, waits_for: tuple[str, ...] = (),
              work_unit_id: str | None = None) -> StartResult:
        """Start an action; what ``who`` may do was decided by the gate (:mod:`cda.operations.gate`)
        before this runs: ``waits_for`` are the approvals it decided the action waits for.
        ``work_unit_id`` (spec §13, a server with ``--legacy-aliases``): the legacy id this action
        answers for, recorded under ``legacy.aliases[]`` in a ``legacy.alias`` receipt."""
        escalated = None
        if escalation is not None:
            escalated = decide(escalation, inputs.risk_class)
            if not escalated.escalate:
                raise EdgeError("conflict", f"not escalated: {escalated.reason}", ["params", "escalation", "signals"])
        specs = list(subactions or [])
        early = [(i, spec, self.revisions.spawn(spec, i, who, self._scope(who)))
                 for i, spec in enumerate(specs) if spec.edge != "notify"]
        bound = [out for _, spec, out in early if spec.edge == "bind"]
        action_id = self._id_of(who, inputs, bound)
        with self.lock:
            if action_id in self.runs:
                self._alias(action_id, work_unit_id, None)
                return StartResult(action_id=action_id, topic=f"actions/{action_id}",
                                   status=self.runs[action_id].status, existing=True)
            stored = read_stream(self.db, action_id, None)
            if stored and not (self._rerunnable(stored[-1]) and self.visible(who, action_id)):
                self._alias(action_id, work_unit_id, None)
                return StartResult(action_id=action_id, topic=f"actions/{action_id}",
                                   status=self.get(action_id).status, existing=True)
            run = LiveAction(action_id, who, inputs, bound=bound, notify=[s for s in specs if s.edge == "notify"])
            self.runs[action_id] = run
            self.hub.live.add(action_id)
        self.state.own(action_id, who)  # before any receipt: a crash never leaves a started action ownerless
        run.attempt = self.attempts.begin(action_id, "service.start", {"principal": who.name, "profile": who.profile},
                                          {"inputs_sha256": sha256_hex(canonical_json(inputs.model_dump(mode="json")))})
        self._alias(action_id, work_unit_id, run.attempt)
        run.access = who.access(self.egress_cap)  # type: ignore[arg-type]  # cda.access: what the run may touch
        run.needed = self.approvals.needed(inputs, waits_for)
        if run.needed or (escalated is not None and escalated.short) or any(s.edge != "bind" for _, s, _ in early):
            self._began(run, bound)  # it streams before its run: action_started first (docs/service.md)
        for _, spec, out in early:
            if spec.edge != "bind":  # the runner links (and locks) what it binds
                self._emit(run, ActionLinked(action_id=action_id, seq=0, linked_action_id=out.action_id,
                                             ability=spec.ability, edge=spec.edge))
        linked = [f"{out.action_id}.r{out.revision}" for _, _, out in early]
        if escalated is not None:
            self.receipt(action_id, "cup.escalate", {"signals": escalated.fired, "risk_class": inputs.risk_class},
                         {"reason": escalated.reason, "wall": escalated.wall, "short": escalated.short},
                         attempt=run.attempt)
            if escalated.short:
                self._short(run, escalated.reason)
                return StartResult(action_id=action_id, topic=f"actions/{action_id}", status="partial", linked=linked)
            wall = escalated.wall
            if wall is not None and (inputs.budgets.wall is None or inputs.budgets.wall > wall):
                run.inputs = inputs.model_copy(update={"budgets": inputs.budgets.model_copy(update={"wall": wall})})
        if run.needed:
            self.approvals.wait(run)
        else:
            self._submit(run)
        return StartResult(action_id=action_id, topic=f"actions/{action_id}", status=run.status, linked=linked)

    def _alias(self, action_id: str, work_unit_id: str | None, attempt: int | None) -> None:
        """Spec §13: the legacy work unit id ``work_unit_id`` maps to ``action_id``; kept in the
        receipt log under ``legacy.aliases[]`` (filed under the attempt it started, if any)."""
        if work_unit_id is not None:
            self.receipt(action_id, "legacy.alias", {"work_unit_id": work_unit_id},
                         {"legacy": {"aliases": [{"work_unit_id": work_unit_id, "action_id": action_id}]}},
                         attempt=attempt)

    def _began(self, run: LiveAction, bound: Sequence[BoundOutput]) -> None:
        """``action_started`` by the service, for an action that streams before its run (a wait
        for approvals, a link, an escalation's reserve): every stream begins with it. Its
        ``inputs_hash`` is of the inputs as submitted (with what they bind); the run's receipts
        hash the inputs it reads (the decisions added: approvals-as-input). The runner, seeing
        it in the prelude, does not start the stream a second time."""
        inputs_hash = sha256_hex(canonical_json(with_bindings(run.inputs, bound).model_dump(mode="json")))
        self._emit(run, ActionStarted(action_id=run.action_id, seq=0, inputs_hash=inputs_hash))

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
        return stopped_as(last.type, json_object(last.data)) is not None

    def _short(self, run: LiveAction, reason: str) -> None:
        """Escalated with less wall time than CDA reserves: a terminal partial at once (spec §9)."""
        caveat = f"escalation with too little time: {reason}; no search ran"
        self._emit(run, ActionPartial(action_id=run.action_id, seq=0, caveats=[caveat], next_tests=[
            NextTestSuggestion(question="Escalate again with at least 20 s of wall time left",
                               suggested_ability="default")]))
        self.attempts.close(run, "partial")
        self._forget(run)

    def refresh(self, who: Principal, action_id: str) -> RefreshResult:
        """Ask a sub-action's provider again (:meth:`~cda.service.revisions.Revisions.refresh`)."""
        return self.revisions.refresh(who, action_id, self.visible)

    def accept_update(self, who: Principal, action_id: str, update: str) -> StartResult:
        """Accept a newer revision of a bound output: a structure revision, a new action."""
        held = self.state.consumer(action_id)
        if held is None or not self.visible(who, action_id):
            raise EdgeError("not_found", f"no finished action {action_id} with bound outputs on this server",
                            ["params", "action_id"])
        bound = self.revisions.offered(held, action_id, update)
        accepted = next(b for b in bound if f"{b.action_id}.r{b.revision}" == update)
        new_id = self._id_of(who, held.inputs, bound)
        run = LiveAction(new_id, who, held.inputs, bound=bound, revision=held.revision + 1,
                         supersedes=held.plan_bundle_id)
        run.access = who.access(self.egress_cap)  # type: ignore[arg-type]  # the accepting caller's, as at start
        with self.lock:
            existing = bool(new_id in self.runs or read_stream(self.db, new_id, None))
            if not existing:
                self.runs[new_id] = run
                self.hub.live.add(new_id)
        self.state.withdraw(action_id, accepted.action_id, accepted.revision)  # no longer "available" once accepted
        if existing:  # accepted before: its state now (it may have finished), as start answers
            return StartResult(action_id=new_id, topic=f"actions/{new_id}", status=self.get(new_id).status,
                               existing=True, revision=held.revision + 1)
        self.state.own(new_id, who)
        run.attempt = self.attempts.begin(new_id, "service.start", {"principal": who.name, "profile": who.profile},
                                          {"inputs_sha256": sha256_hex(canonical_json(held.inputs.model_dump(mode="json"))),
                                           "revision_of": action_id})
        self.receipt(action_id, "bind.accept", {"update": update, "principal": who.name}, {"revision_action": new_id})
        self._submit(run)
        return StartResult(action_id=new_id, topic=f"actions/{new_id}", status="running", revision=held.revision + 1)

    def decide(self, who: Principal, action_id: str, approval: str, grant: bool, reason: str) -> ActionGetResult:
        run = self._own(who, action_id)
        if grant and not who.approves:  # the gate refuses it first (actions.approve needs an approver)
            raise EdgeError("forbidden", "an approval comes from an approver (a partner may deny)", ["method"])
        with run.gate:  # two approvals (or an approval and a cancel) at once: one submits, at most
            if self.approvals.decide(run, who, approval, grant, reason):
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
                self.scheduling.stop(run, "ActionCancelled")
        return self.get(action_id)

    def _own(self, who: Principal, action_id: str) -> LiveAction:
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
        an open server, the one anonymous partner's. An approver sees every action too (to approve
        what it waits for)."""
        if who.sees_all:
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
                body = json_object(e.data)
                if body.get("kind") == "boundary_summary":
                    out["boundary_summary"] = body.get("payload", {}).get("text")
        end = ended(events)  # the terminal event, before any offered update that follows it
        if end is not None:  # stored: final even while its thread winds down
            body = json_object(end.data)
            outputs = body.get("outputs") or {}
            out["status"] = stopped_as(end.type, body) or outputs.get("status") or end.type.removeprefix("action_")
            for key in ("revision", "summary_artifact_id", "plan_bundle_id", "evidence_bundle_id"):
                out[key] = outputs.get(key)
        elif run is not None:
            out["status"] = run.status
            out["approvals_needed"] = list(run.needed)
        return ActionGetResult.model_validate(out)

    # -- running ----------------------------------------------------------------------------
    def _submit(self, run: LiveAction) -> None:
        """Queue ``run`` for a slot; the time it waited for a person is taken out of its queue
        (TTFS from actions.start counts the server's queue, not a person's decision)."""
        if run.waiting_since is not None:
            run.queued_since += time.monotonic() - run.waiting_since
        self.scheduling.submit(run, self._execute)

    def _execute(self, run: LiveAction) -> None:
        with granted(run.access):  # a pool thread does not inherit the caller's context
            self._run(run)

    def _run(self, run: LiveAction) -> None:
        """One attempt's run, in its thread, once it holds a slot: the inputs it reads (the
        partner cap, the decisions), the runner (here or in a runner process), then the trace,
        the signature, the consumer and the notified sub-actions; a stop or a crash still ends
        the stream."""
        inputs, denial = self.approvals.applied(run, self.scheduling.capped(run, run.inputs))
        if denial is not None:
            self._emit(run, ActionNotice(action_id=run.action_id, seq=0, level="warning", message=denial))
        try:
            if run.stop is not None:  # stopped while it waited for a slot: nothing ran, nothing to report
                raise Stop(run.stop)
            ken, ken_path = None, None
            if inputs.ken is not None and inputs.ken.path is not None:  # the gate let a file reader through; read under run.access
                path = Path(inputs.ken.path)
                ken_path = path if path.is_absolute() else self.db.parent / path
            # the run continues the attempt the service began: after the events already streamed
            # (prelude), its receipts under that attempt (AttemptSink), its audit over the stored events
            job = RunnerJob(run.action_id, inputs, self.db.parent, self.thresholds, list(run.bound), ken_path,
                            revision=run.revision, supersedes=run.supersedes, attempt=run.attempt,
                            prelude=list(run.events), approval_waits=list(run.waits), access=run.access,
                            queued_since=run.queued_since)
            runners = self.scheduling.runners
            if runners is not None:  # in a runner process; its events come back through _emit
                try:
                    result = runners.run(run.lane, job, lambda e: self._emit(run, e), audit=self.events.confirm,
                                         stopping=lambda: run.stop is not None)
                except RunnerStopped:  # the child saw the stop first: the same end as in-process
                    raise Stop(run.stop or "ActionInterrupted") from None
            else:
                if ken_path is not None:
                    from cda.ken.loaders import load_ken
                    ken = load_ken(ken_path)
                with cancel_scope(run.token):  # its deadlines and solvers stop with a cancel
                    result = run_job(job, ken, self.log, lambda e: self._emit(run, e), self.events.confirm)
            self.reflection.put(run.action_id, result.trace, attempt=result.attempt)
            self.attempts.sign(run.action_id, result.attempt, result.events)  # over the action.end and the trace's receipt
            if run.bound:  # accept_update needs these, also after a restart
                self.revisions.file_consumer(run, result.outputs)
                self.revisions.tell(run.action_id)  # what was offered while it ran, now on its ended stream
            for i, spec in enumerate(run.notify):  # notify: told once the consumer is done
                try:
                    self.revisions.spawn(spec, i, run.owner, self._scope(run.owner))
                except EdgeError as exc:
                    self.receipt(run.action_id, "notify.failed", {"source": spec.source}, {"error": str(exc)},
                                 status="failed", attempt=run.attempt)
        except Stop as stop:
            reason = "cancelled by the client" if str(stop) == "ActionCancelled" else \
                "interrupted: the server stopped while the action ran; start it again"
            self.receipt(run.action_id, "action.stopped", {"reason": str(stop)}, {}, status="failed",
                         attempt=run.attempt)
            self.attempts.terminal(run, reason, str(stop))
            self.attempts.close(run, "failed")
        except Exception as exc:  # noqa: BLE001 - a bug must still end the stream
            self.receipt(run.action_id, "action.crashed", {"error_type": type(exc).__name__}, {}, status="failed",
                         attempt=run.attempt)
            if not (run.events and run.events[-1].type in TERMINAL):  # ended already: no second terminal
                self.attempts.terminal(run, f"the action stopped on an internal error ({type(exc).__name__})",
                                       "InternalError")
                self.attempts.close(run, "failed")
        finally:
            self._forget(run)
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

    def _finish(self, run: LiveAction, error: str, error_type: str) -> None:
        """End an attempt that never ran (a cancel or a stop while it waited for approvals)."""
        self.attempts.terminal(run, error, error_type)
        self.attempts.close(run, "failed")
        self._forget(run)

    def _forget(self, run: LiveAction) -> None:
        with self.lock:
            self.runs.pop(run.action_id, None)

    # -- the server's start and stop ----------------------------------------------------------
    def recover(self) -> list[str]:
        """Mark every action the store holds unfinished as interrupted (the server restarted)."""
        return self.attempts.recover(set(self.runs))

    def interrupt_all(self) -> None:
        """The server is asked to stop (SIGTERM): every running action's token is cancelled now,
        so its solver is interrupted and it ends with what it found while the server still
        drains its connections. Never blocks (called from the signal's handler)."""
        for run in list(self.runs.values()):
            if run.status != "waiting_user":
                self.scheduling.stop(run, "ActionInterrupted")

    def shutdown(self, wait_s: float = SHUTDOWN_WAIT_S) -> None:
        """Stop: waiting actions end interrupted, running ones are stopped; wait at most ``wait_s``
        for them, then close the store. A run still going then is in code that reads no deadline:
        :attr:`stuck` counts them and the store is left open under them (the process is about to
        exit; the next start marks them interrupted)."""
        for run in list(self.runs.values()):
            if run.status == "waiting_user":
                self._finish(run, "interrupted: the server stopped while the action waited", "ActionInterrupted")
            else:
                self.scheduling.stop(run, "ActionInterrupted")
        self.stuck = self.scheduling.wait(list(self.runs.values()), wait_s)
        if self.stuck:
            return
        self.state.close()
        self.attempts.close_stores()
