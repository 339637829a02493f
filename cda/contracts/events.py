"""The events an Action streams (docs/actions.md, "The loop"; docs/service.md, "The streams"), as one discriminated union on ``type``.

Every event carries the ``action_id``, its ``seq`` (0-based position in the stream, which is
also its SSE ``Last-Event-ID`` for cursor resume) and ``ts``, the wall time it was emitted.
``ts`` and the wall-clock ``measurements`` of a terminal event's ``metrics`` are the only
fields that may differ between two runs of the same inputs, so determinism is compared on
:func:`event_without_time` (:func:`without_time` on JSON data).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, TypeAdapter, model_serializer

from cda.contracts.action import CDAOutputs, NextTestSuggestion
from cda.contracts.metrics import ActionMetrics

__all__ = [
    "ActionCheckpoint",
    "ActionCompleted",
    "ActionEvent",
    "ActionFailed",
    "ActionLinked",
    "ActionNotice",
    "ActionPartial",
    "ActionProgress",
    "ActionStarted",
    "ActionUpdateAvailable",
    "ActionWaitingUser",
    "CheckpointKind",
    "EVENT_TYPES",
    "event_without_time",
    "parse_event",
    "without_time",
]

CheckpointKind = Literal["boundary_summary", "plan_delta", "verifier_update", "context_delta"]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action_id: str
    seq: int = Field(ge=0, description="0-based position in the stream")
    ts: float | None = Field(default=None, description="wall time (Unix seconds); not part of determinism")
    attempt: int | None = Field(
        default=None, ge=1, description="which run of the action emitted it (re-runs of one action id count up)"
    )


class ActionStarted(_Event):
    type: Literal["action_started"] = "action_started"
    ability: str = "cda"
    inputs_hash: str | None = Field(default=None, description="SHA-256 of the canonical JSON of the inputs")


class ActionProgress(_Event):
    type: Literal["action_progress"] = "action_progress"
    phase: str = Field(description="'parse', 'ground', 'solve', 'verify', 'report', …")
    fraction: float = Field(ge=0.0, le=1.0)
    message: str = ""


class ActionNotice(_Event):
    type: Literal["action_notice"] = "action_notice"
    level: Literal["info", "warning"] = "info"
    message: str


class ActionWaitingUser(_Event):
    """The run needs a person: an approval (egress, PII) or an answer."""

    type: Literal["action_waiting_user"] = "action_waiting_user"
    reason: str
    approvals_needed: list[str] = Field(default_factory=list)


class ActionLinked(_Event):
    """A sub-Action was spawned or bound (spec §4, escalation)."""

    type: Literal["action_linked"] = "action_linked"
    linked_action_id: str
    ability: Literal["research", "sandbox", "default"]
    edge: Literal["dependsOn", "waitFor", "bind", "notify"]


class ActionCheckpoint(_Event):
    type: Literal["action_checkpoint"] = "action_checkpoint"
    kind: CheckpointKind
    payload: dict[str, Any] = Field(default_factory=dict, description="boundary-safe, JSON-safe data")


class ActionCompleted(_Event):
    type: Literal["action_completed"] = "action_completed"
    outputs: CDAOutputs | None = None
    metrics: ActionMetrics | None = Field(
        default=None, description="spec §10 for this attempt, with the runner's wall-clock measurements "
        "(not part of determinism)")


class ActionPartial(_Event):
    """A budget ran out, or the run was stopped: what is known, with caveats and the tests that would help."""

    type: Literal["action_partial"] = "action_partial"
    stopped: Literal["cancelled", "interrupted"] | None = Field(default=None, description=(
        "set when the run was stopped before its budget ran out: 'cancelled' (actions.cancel, Ctrl-C) or "
        "'interrupted' (the server stopping); what it found is still in the outputs"))
    caveats: list[str] = Field(default_factory=list)
    next_tests: list[NextTestSuggestion] = Field(default_factory=list)
    outputs: CDAOutputs | None = None
    metrics: ActionMetrics | None = Field(
        default=None, description="spec §10 for this attempt, with the runner's wall-clock measurements "
        "(not part of determinism)")

    @model_serializer(mode="wrap")
    def _without_unset_stop(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``stopped`` only when set: a partial of a budget has the bytes (and hashes) it always had."""
        data: dict[str, Any] = handler(self)
        if data.get("stopped") is None:
            data.pop("stopped", None)
        return data


class ActionFailed(_Event):
    type: Literal["action_failed"] = "action_failed"
    error: str = Field(description="one line a person can read")
    error_type: str | None = Field(default=None, description="the error's class name, e.g. 'DSLSyntaxError'")
    metrics: ActionMetrics | None = Field(
        default=None, description="spec §10 for this attempt, with the runner's wall-clock measurements "
        "(not part of determinism)")


class ActionUpdateAvailable(_Event):
    """A newer revision of a sub-action output this action bound is offered to it (spec §4, bind ⇒
    lock): the one event that follows a terminal event. It is appended after the attempt's
    ``action.end`` receipt, and an ``update.offered`` receipt of its own vouches for it
    (docs/service.md, "Sub-actions"); ``actions.accept_update`` with ``sub_action`` accepts it."""

    type: Literal["action_update_available"] = "action_update_available"
    sub_action: str = Field(description="the offered revision's stream, '<base>.r<n>'")
    revision: int = Field(ge=1)
    sha256: str = Field(description="SHA-256 of the offered revision's text")
    artifact_id: str


ActionEvent = Annotated[
    ActionStarted
    | ActionProgress
    | ActionNotice
    | ActionWaitingUser
    | ActionLinked
    | ActionCheckpoint
    | ActionCompleted
    | ActionPartial
    | ActionFailed
    | ActionUpdateAvailable,
    Field(discriminator="type"),
]

EVENT_TYPES: dict[str, type[BaseModel]] = {
    "action_started": ActionStarted,
    "action_progress": ActionProgress,
    "action_notice": ActionNotice,
    "action_waiting_user": ActionWaitingUser,
    "action_linked": ActionLinked,
    "action_checkpoint": ActionCheckpoint,
    "action_completed": ActionCompleted,
    "action_partial": ActionPartial,
    "action_failed": ActionFailed,
    "action_update_available": ActionUpdateAvailable,
}
"""The SSE event name of each event model."""

_ADAPTER: TypeAdapter[ActionEvent] = TypeAdapter(ActionEvent)


def parse_event(data: dict[str, Any]) -> ActionEvent:
    """The event a JSON object describes, chosen by its ``type``.

    Raises pydantic's ``ValidationError`` (a ``ValueError``) naming the field at fault.

    >>> parse_event({"type": "action_progress", "action_id": "a1", "seq": 1, "phase": "solve", "fraction": 0.5}).phase
    'solve'
    """
    return _ADAPTER.validate_python(data)


def event_without_time(event: ActionEvent) -> dict[str, Any]:
    """The event as JSON-safe data without ``ts``: equal for two runs of the same inputs.

    >>> event_without_time(ActionNotice(action_id="a1", seq=0, ts=12.5, message="hi"))["message"]
    'hi'
    """
    return without_time(event.model_dump(mode="json"))


def without_time(data: dict[str, Any]) -> dict[str, Any]:
    """An event's JSON data without what wall time decides: ``ts`` and ``metrics.measurements``.

    >>> without_time({"type": "action_completed", "ts": 1.5, "metrics": {"partial": False, "measurements": {}}})
    {'type': 'action_completed', 'metrics': {'partial': False}}
    """
    out = {k: v for k, v in data.items() if k != "ts"}
    metrics = out.get("metrics")
    if isinstance(metrics, dict) and "measurements" in metrics:
        out["metrics"] = {k: v for k, v in metrics.items() if k != "measurements"}
    return out
