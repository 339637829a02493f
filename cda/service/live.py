"""An action the server holds in memory while it waits or runs, and what a refusal or a stop raises.

:class:`LiveAction` is the one record the four parts of the service's action handling share
(docs/service.md, "How the server runs an action"): :mod:`~cda.service.attempts` numbers and
stores its events, :mod:`~cda.service.approvals` keeps what it waits for,
:mod:`~cda.service.scheduling` runs and stops it, :mod:`~cda.service.revisions` remembers what it
bound. :class:`~cda.service.actions.ActionManager` holds them by action id.
"""

from __future__ import annotations

import json
import threading
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from cda.access import NOTHING, Access
from cda.actions.bindings import BoundOutput
from cda.adapters.auth import Principal
from cda.contracts.action import CDAInputs
from cda.contracts.deadline import CancelToken
from cda.contracts.events import ActionEvent
from cda.contracts.metrics import ApprovalWait
from cda.operations.base import OperationError
from cda.service.protocol import SubActionSpec
from cda.service.scheduler import Ticket

__all__ = ["RECEIVED", "RERUNNABLE", "STOPS", "EdgeError", "LiveAction", "Stop", "json_object", "received_at",
           "stopped_as"]

RECEIVED: ContextVar[float | None] = ContextVar("cda_service_received", default=None)
"""``time.monotonic()`` when the ToolBus read the frame of the call being handled (set per call;
a thread the call runs in sees it): an action's TTFS from ``actions.start`` starts there, so the
time the call waited for a thread and the gate is in its queue too."""


def received_at() -> float:
    """When the call being handled was read (:data:`RECEIVED`), else now."""
    value = RECEIVED.get()
    return time.monotonic() if value is None else value

RERUNNABLE = frozenset({"ActionInterrupted", "ActionCancelled"})
"""The error types of an attempt ended without its findings by a stop: a new start runs a new attempt."""

STOPS = {  # the stop's error type -> (what the run's token says, the token's kind)
    "ActionCancelled": ("cancelled by the client (actions.cancel)", "cancelled"),
    "ActionInterrupted": ("interrupted: the server is stopping", "interrupted"),
}


class EdgeError(OperationError):
    """A call the server refuses: ``code`` (forbidden, not_found, conflict) and the ``path`` at fault."""


class Stop(BaseException):  # noqa: N818 - not an error: unwinds the runner at its next event
    """Raised inside the run's event callback to end it (cancel, server stopping) without its findings."""


@dataclass
class LiveAction:
    """One attempt of an action, from its start until its thread is done."""

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
    queued_since: float = field(default_factory=received_at)  # actions.start read, moved on by approval waits (TTFS)
    waits: list[ApprovalWait] = field(default_factory=list)  # each decision and how long it took (§10)

    access: Access = field(default_factory=lambda: NOTHING)  # what the run may touch (cda.access)
    ticket: Ticket | None = None  # its place with the scheduler, once submitted to run
    lane: int = 0  # which scheduler (and runner process, with --processes) runs it


def stopped_as(event_type: str, body: dict[str, Any]) -> str | None:
    """``"cancelled"`` or ``"interrupted"`` when a terminal event ends a stopped attempt: one that
    ended with its findings (``action_partial`` with ``stopped``) or without them
    (``action_failed``, the error types of :data:`RERUNNABLE`)."""
    if event_type == "action_partial" and body.get("stopped") in ("cancelled", "interrupted"):
        return str(body["stopped"])
    if event_type == "action_failed" and body.get("error_type") in RERUNNABLE:
        return "interrupted" if body["error_type"] == "ActionInterrupted" else "cancelled"
    return None


def json_object(text: str) -> dict[str, Any]:
    """A stored event's body as a dict (``{}`` for anything else)."""
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
