"""The ToolBus frames (spec §7.1): what a client sends over ``/toolbus`` and what it gets back.

A request is ``{id, method, params}``; the answer carries the same ``id`` and either ``result``
or ``error: {code, message, path}`` (``path``: where in the frame the fault is, as a list of keys
and indexes). Each method's params and result are a pydantic model here; the committed JSON
Schemas in ``schemas/toolbus/`` are generated from these models (:func:`toolbus_schemas`,
checked by a test), so a client in any language validates against the same contract the server
enforces. There is no ``cda.*`` method: a CDA run is ``actions.start`` with ``ability: "cda"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cda.contracts.action import CDAInputs
from cda.contracts.limits import MAX_FINITE_SECONDS
from cda.service.investigations import INVESTIGATE_METHODS

__all__ = [
    "METHODS",
    "AcceptParams",
    "ActionGetResult",
    "ActionRef",
    "ApprovalParams",
    "ErrorBody",
    "ErrorFrame",
    "Escalation",
    "ReflectParams",
    "RefreshResult",
    "Request",
    "ResultFrame",
    "StartParams",
    "StartResult",
    "SubActionSpec",
    "toolbus_schemas",
    "write_schemas",
]

MAX_FRAME_ID_CHARS = 128
MAX_FRAME_ID_INT = 2**53  # an id a JavaScript client reads back exactly

FrameId = (Annotated[int, Field(ge=-MAX_FRAME_ID_INT, le=MAX_FRAME_ID_INT)]
           | Annotated[str, Field(max_length=MAX_FRAME_ID_CHARS)])


def valid_frame_id(value: Any) -> bool:
    """Whether ``value`` is an id a frame may carry (echoed back on an error only then)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -MAX_FRAME_ID_INT <= value <= MAX_FRAME_ID_INT
    return isinstance(value, str) and len(value) <= MAX_FRAME_ID_CHARS


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Request(_Frame):
    """One call: the client chooses ``id`` and gets it back on the answer."""

    id: FrameId = Field(description="the client's id for this call (string <= 128 chars or integer within ±2**53)")
    method: str = Field(min_length=1, max_length=64, pattern=r"^[a-z]+(\.[a-z_]+)+$")
    params: dict[str, Any] = Field(default_factory=dict)


Signal = Literal["contradictions", "high_doubt", "low_confidence", "policy_risk", "critical_decision"]


class Escalation(_Frame):
    """A CUP escalation (spec §9): the signals that fired and the caller's wall time left."""

    signals: list[Signal] = Field(default_factory=list, max_length=5)
    wall_remaining: float | None = Field(default=None, gt=0, le=MAX_FINITE_SECONDS,
                                         description="seconds the escalating caller has left")

    @field_validator("signals")
    @classmethod
    def _once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("each signal at most once")
        return value


class SubActionSpec(_Frame):
    """A sub-Action CDA spawns through this server's local providers, and how it is linked."""

    ability: Literal["research", "sandbox", "default"]
    source: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="what the provider is asked for")
    edge: Literal["dependsOn", "waitFor", "bind", "notify"] = "bind"


class StartParams(_Frame):
    ability: Literal["cda"] = Field(description="the only ability a client starts")
    inputs: CDAInputs
    subactions: list[SubActionSpec] = Field(default_factory=list, max_length=16)
    escalation: Escalation | None = None


class RefreshResult(_Frame):
    action_id: str = Field(description="the new revision's action (its own stream)")
    revision: int
    sha256: str
    updates_for: list[str] = Field(description="consumers that bound an older revision: update_available")


class AcceptParams(_Frame):
    action_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")
    update: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$",
                        description="the sub-action revision to accept (from actions.refresh)")


class StartResult(_Frame):
    action_id: str
    topic: str = Field(description="the stream to follow: GET /streams/<topic>")
    status: str = Field(description="'running', 'waiting_user', or the state of an action already started")
    existing: bool = Field(default=False, description="true when these inputs (same seed) were already started")
    revision: int = Field(default=1, description="structure revision (> 1 after an accepted update)")
    linked: list[str] = Field(default_factory=list, description="the sub-actions spawned for it")


class ActionRef(_Frame):
    action_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")


class ApprovalParams(_Frame):
    action_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")
    approval: str = Field(min_length=1, max_length=64, description="what is approved, e.g. 'egress:external'")
    reason: str = Field(default="", max_length=1000)


class ReflectParams(_Frame):
    action_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$")
    approval: str = Field(min_length=1, max_length=512, description="a reflection approval token")


class ActionGetResult(_Frame):
    action_id: str
    status: str = Field(description="running | waiting_user | completed | partial | failed | escalated | "
                                    "abstained | interrupted | cancelled")
    revision: int | None = None
    summary_artifact_id: str | None = None
    plan_bundle_id: str | None = None
    evidence_bundle_id: str | None = None
    boundary_summary: str | None = Field(default=None, description="the latest boundary summary text")
    approvals_needed: list[str] = Field(default_factory=list)
    updates_available: list[str] = Field(default_factory=list, description="newer revisions of bound outputs")
    last_event_id: int | str | None = Field(default=None, description=(
        "the SSE id of the latest attempt's last event, what a client resumes with as Last-Event-ID: "
        "its seq (a number) for a first attempt, 'attempt:seq' for a re-run"))


class ErrorBody(_Frame):
    code: Literal["invalid_frame", "unknown_method", "invalid_params", "forbidden", "not_found", "conflict",
                  "internal"]
    message: str
    path: list[str | int] = Field(default_factory=list)


class ResultFrame(_Frame):
    id: FrameId | None
    result: dict[str, Any]


class ErrorFrame(_Frame):
    id: FrameId | None
    error: ErrorBody


#: method name -> (params model, result model); the profile rules live in toolbus.py
METHODS: dict[str, tuple[type[BaseModel], type[BaseModel] | None]] = {
    "actions.start": (StartParams, StartResult),
    "actions.cancel": (ActionRef, ActionGetResult),
    "actions.approve": (ApprovalParams, ActionGetResult),
    "actions.deny": (ApprovalParams, ActionGetResult),
    "actions.get": (ActionRef, ActionGetResult),
    "actions.refresh": (ActionRef, RefreshResult),
    "actions.accept_update": (AcceptParams, StartResult),
    "reflect.trace": (ReflectParams, None),
    **INVESTIGATE_METHODS,  # investigate.start|observe|status|history|undo|close (investigations.py)
}


def toolbus_schemas() -> dict[str, dict[str, Any]]:
    """File name -> JSON Schema of every frame and every method's params and result."""
    out: dict[str, dict[str, Any]] = {
        "request.schema.json": Request.model_json_schema(),
        "result.schema.json": ResultFrame.model_json_schema(),
        "error.schema.json": ErrorFrame.model_json_schema(),
    }
    for method, (params, result) in METHODS.items():
        out[f"{method}.params.schema.json"] = params.model_json_schema()
        if result is not None:
            out[f"{method}.result.schema.json"] = result.model_json_schema()
    return out


def write_schemas(folder: Path) -> list[Path]:
    """Write :func:`toolbus_schemas` into ``folder`` (sorted keys, one trailing newline)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in toolbus_schemas().items():
        path = folder / name
        path.write_text(json.dumps(schema, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
