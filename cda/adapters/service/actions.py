"""Actions the server runs: started over the ToolBus, run off the event loop, streamed as they go.

Each action runs in a worker thread (a bounded pool) through :func:`cda.actions.runner.run_action`;
the service sequences its stream: every event gets the next ``seq`` of the action, is stored
(:class:`~cda.adapters.event_store.EventStore`, the SQLite file of the server) and then handed
to the :class:`~cda.adapters.service.streams.Hub`, which wakes that action's subscribers.

*At the server edge* (before anything runs): a partner may not name a file on the server
(``ken.path``) or run code (``functions``); an egress class above the server's cap or a PII
posture of ``consent`` needs an approval: the action waits (``action_waiting_user``) until
``actions.approve`` or ``actions.deny`` (approvals-as-input, each one a receipt). A denial runs
the action within the cap, so its external checks become receipt stubs and its summary is the
conservative one (QA scenario 3).

*Cancel* takes effect at the action's next event (a terminal ``action_failed`` with
``error_type: "ActionCancelled"``). *Restarts*: an action the store holds unfinished when the
server starts was cut off by a crash; it gets a terminal ``action_failed`` with
``error_type: "ActionInterrupted"`` and a receipt, so no client ever sees it "running" forever.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cda.actions.receipts import ReceiptLog
from cda.actions.reflection import ReflectionStore
from cda.actions.runner import action_id_of, run_action
from cda.adapters.action_entry import _http_provider
from cda.adapters.event_store import EventStore
from cda.adapters.service.auth import Principal
from cda.adapters.service.protocol import ActionGetResult, StartResult
from cda.adapters.service.store import TERMINAL, StoredEvent, last_events, read_stream
from cda.adapters.service.streams import Hub
from cda.contracts.abstain import AbstainThresholds
from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionEvent, ActionFailed, ActionNotice, ActionWaitingUser
from cda.contracts.receipt import Receipt, canonical_json, sha256_hex
from cda.errors import CDAError

__all__ = ["ActionManager", "EdgeError", "EGRESS_RANK"]

EGRESS_RANK = {"local": 0, "partner": 1, "external": 2}


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
    next_seq: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class ActionManager:
    """Starts, cancels, approves and describes actions; owns the writers of the server's file."""

    def __init__(self, db: Path, hub: Hub, *, workers: int = 2, egress_cap: str = "local") -> None:
        self.db = db
        self.hub = hub
        self.egress_cap = egress_cap
        self.events = EventStore(db)
        self.log = ReceiptLog(db)
        self.reflection = ReflectionStore(db, self.log)
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cda-action")
        self.runs: dict[str, _Run] = {}
        self.lock = threading.Lock()
        self.thresholds = AbstainThresholds.from_env(os.environ)

    # -- receipts and events ---------------------------------------------------------------
    def receipt(self, action_id: str, name: str, inputs: dict[str, Any], result: dict[str, Any],
                status: str = "ok") -> None:
        """One receipt of the service's own (approvals, cancels, refusals, interruptions)."""
        self.log.append(Receipt(action_id=action_id, seq=self.log.count(action_id), kind="action", name=name,
                                inputs_hash=sha256_hex(canonical_json(inputs)), result=result,
                                status=status))  # type: ignore[arg-type]

    def _emit(self, run: _Run, event: ActionEvent) -> None:
        with run.lock:
            event = event.model_copy(update={"seq": run.next_seq})
            run.next_seq += 1
            self.events.append(event)
        body = canonical_json(event.model_dump(mode="json"))
        self.hub.publish_threadsafe(run.action_id, StoredEvent(event.seq, event.type, body))
        if run.stop is not None and event.type not in TERMINAL:
            raise _Stop(run.stop)

    def _terminal(self, run: _Run, error: str, error_type: str) -> None:
        run.stop = None
        self._emit(run, ActionFailed(action_id=run.action_id, seq=0, error=error, error_type=error_type))

    # -- the methods ------------------------------------------------------------------------
    def start(self, who: Principal, inputs: CDAInputs) -> StartResult:
        if who.profile != "internal":
            if inputs.ken is not None and inputs.ken.path is not None:
                raise EdgeError("forbidden", "a partner cannot name a file on the server; give the Ken graph inline",
                                ["params", "inputs", "ken", "path"])
            if inputs.functions:
                raise EdgeError("forbidden", "function checks run code on the server: internal profile only",
                                ["params", "inputs", "functions"])
        action_id = action_id_of(inputs)
        with self.lock:
            if action_id in self.runs:
                return StartResult(action_id=action_id, topic=f"actions/{action_id}",
                                   status=self.runs[action_id].status, existing=True)
            stored = read_stream(self.db, action_id, None)
            if stored:
                return StartResult(action_id=action_id, topic=f"actions/{action_id}",
                                   status=self.get(action_id).status, existing=True)
            run = _Run(action_id, who, inputs)
            self.runs[action_id] = run
            self.hub.live.add(action_id)
        self.receipt(action_id, "service.start", {"principal": who.name, "profile": who.profile},
                     {"inputs_sha256": sha256_hex(canonical_json(inputs.model_dump(mode="json")))})
        if EGRESS_RANK[inputs.policies.egress] > EGRESS_RANK[self.egress_cap]:
            run.needed.append(f"egress:{inputs.policies.egress}")
        if inputs.policies.pii_posture == "consent":
            run.needed.append("pii:consent")
        if run.needed:
            run.status = "waiting_user"
            self._emit(run, ActionWaitingUser(
                action_id=action_id, seq=0, approvals_needed=list(run.needed),
                reason=f"the server's egress cap is '{self.egress_cap}'; approve or deny: {', '.join(run.needed)}"))
        else:
            self.pool.submit(self._execute, run)
        return StartResult(action_id=action_id, topic=f"actions/{action_id}", status=run.status)

    def decide(self, who: Principal, action_id: str, approval: str, grant: bool, reason: str) -> ActionGetResult:
        run = self._own(who, action_id)
        if run.status != "waiting_user" or approval not in run.needed:
            raise EdgeError("conflict", f"action {action_id} is not waiting for {approval!r} "
                            f"(waiting for: {', '.join(run.needed) or 'nothing'})", ["params", "approval"])
        (run.granted if grant else run.denied).add(approval)
        run.needed.remove(approval)
        self.receipt(action_id, "approval.granted" if grant else "approval.denied",
                     {"approval": approval, "principal": who.name}, {"reason": reason},
                     status="ok" if grant else "denied")
        if not run.needed:
            run.status = "running"
            self.pool.submit(self._execute, run)
        return self.get(action_id)

    def cancel(self, who: Principal, action_id: str) -> ActionGetResult:
        run = self._own(who, action_id)
        self.receipt(action_id, "service.cancel", {"principal": who.name}, {"status_then": run.status})
        if run.status == "waiting_user":
            self._finish(run, "cancelled by the client", "ActionCancelled")
        else:
            run.stop = "ActionCancelled"
        return self.get(action_id)

    def _own(self, who: Principal, action_id: str) -> _Run:
        run = self.runs.get(action_id)
        if run is None:
            raise EdgeError("not_found", f"no running action {action_id} on this server", ["params", "action_id"])
        if who.profile != "internal" and who.name != run.owner.name:
            raise EdgeError("forbidden", f"action {action_id} was started by another client", ["params", "action_id"])
        return run

    def get(self, action_id: str) -> ActionGetResult:
        events = read_stream(self.db, action_id, None)
        run = self.runs.get(action_id)
        if not events and run is None:
            raise EdgeError("not_found", f"no action {action_id} in this store", ["params", "action_id"])
        out: dict[str, Any] = {"action_id": action_id, "status": "running"}
        if events:
            out["last_event_id"] = events[-1].seq
        for e in events:
            if e.type == "action_checkpoint":
                body = _json(e.data)
                if body.get("kind") == "boundary_summary":
                    out["boundary_summary"] = body.get("payload", {}).get("text")
        if events and events[-1].type in TERMINAL:  # stored: final even while its thread winds down
            body = _json(events[-1].data)
            outputs = body.get("outputs") or {}
            error_type = body.get("error_type")
            out["status"] = ("interrupted" if error_type == "ActionInterrupted" else
                             "cancelled" if error_type == "ActionCancelled" else
                             outputs.get("status") or events[-1].type.removeprefix("action_"))
            for key in ("revision", "summary_artifact_id", "plan_bundle_id", "evidence_bundle_id"):
                out[key] = outputs.get(key)
        elif run is not None:
            out["status"] = run.status
            out["approvals_needed"] = list(run.needed)
        return ActionGetResult.model_validate(out)

    # -- running ----------------------------------------------------------------------------
    def _execute(self, run: _Run) -> None:
        inputs = run.inputs
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
            ken = None
            if inputs.ken is not None and inputs.ken.path is not None:  # internal profile only (checked at start)
                from cda.ken.loaders import load_ken
                path = Path(inputs.ken.path)
                ken = load_ken(path if path.is_absolute() else self.db.parent / path)
            result = run_action(inputs, ken=ken, out_dir=self.db.parent, receipts=self.log,
                                subscribers=[lambda e: self._emit(run, e)], llm_factory=_http_provider,
                                thresholds=self.thresholds, action_id=run.action_id)
            self.reflection.put(run.action_id, result.trace)
        except _Stop as stop:
            reason = "cancelled by the client" if str(stop) == "ActionCancelled" else \
                "interrupted: the server stopped while the action ran; start it again"
            self.receipt(run.action_id, "action.stopped", {"reason": str(stop)}, {}, status="failed")
            self._terminal(run, reason, str(stop))
        except Exception as exc:  # noqa: BLE001 - a bug must still end the stream
            self.receipt(run.action_id, "action.crashed", {"error_type": type(exc).__name__}, {}, status="failed")
            self._terminal(run, f"the action stopped on an internal error ({type(exc).__name__})", "InternalError")
        finally:
            with self.lock:
                self.runs.pop(run.action_id, None)

    def _finish(self, run: _Run, error: str, error_type: str) -> None:
        self._terminal(run, error, error_type)
        with self.lock:
            self.runs.pop(run.action_id, None)

    def recover(self) -> list[str]:
        """Mark every action the store holds unfinished as interrupted (the server restarted)."""
        marked = []
        for action_id, last in last_events(self.db).items():
            if last.type in TERMINAL or action_id in self.runs:
                continue
            run = _Run(action_id, Principal("server", "internal"), CDAInputs(problem="(interrupted)"),
                       next_seq=last.seq + 1)
            self.receipt(action_id, "action.interrupted", {"last_event_id": last.seq},
                         {"reason": "the server stopped while the action ran"}, status="failed")
            self._terminal(run, "interrupted: the server stopped while the action ran; start it again",
                           "ActionInterrupted")
            marked.append(action_id)
        return marked

    def shutdown(self) -> None:
        """Stop: waiting actions end interrupted, running ones at their next event; wait for them."""
        for run in list(self.runs.values()):
            if run.status == "waiting_user":
                self._finish(run, "interrupted: the server stopped while the action waited", "ActionInterrupted")
            else:
                run.stop = "ActionInterrupted"
        self.pool.shutdown(wait=True, cancel_futures=False)
        self.reflection.close()
        self.log.close()
        self.events.close()


def _json(text: str) -> dict[str, Any]:
    import json

    value = json.loads(text)
    return value if isinstance(value, dict) else {}
