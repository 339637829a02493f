"""``reflect.approve`` (issue a reflection approval: a token that lets a reviewer read one action's
raw trace) and ``reflect.trace`` (read it with that token). The raw trace stays in the reflection
store of the door's receipt log (``call.env.reflection``): the CLI's ``--store``, the server's file.
Approvals are issued by an approver of the local or internal role only; every issue and every read
is a receipt (``reflection.approve``, ``reflection.read``)."""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import Field

from cda.operations.base import OperationError, Params, Result
from cda.operations.params import optional_path
from cda.operations.registry import Door, Needs, operation

__all__ = ["ReflectApproveParams", "ReflectApproveResult", "ReflectParams", "ReflectTraceResult", "Reflection"]

_ACTION = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:\-]+$", description="the action's id")


class Reflection(Protocol):
    """The reflection store of a door (:class:`~cda.actions.reflection.ReflectionStore`)."""

    def issue_approval(self, action_id: str, reviewer: str) -> str: ...

    def read(self, action_id: str, approval: str | None) -> dict[str, Any] | None: ...


class ReflectApproveParams(Params):
    action_id: str = _ACTION
    reviewer: str = Field(min_length=1, max_length=128, pattern=r"^\S(.*\S)?$",
                          description="who may read the trace with the token")
    store: optional_path("the receipt log holding the trace (receipts.sqlite), on this machine",  # type: ignore[valid-type]
                         store=True) = None


class ReflectApproveResult(Result):
    action_id: str
    reviewer: str
    approval: str = Field(description="the token reflect.trace takes (it reads this action's trace only)")


class ReflectParams(Params):
    action_id: str = _ACTION
    approval: str = Field(min_length=1, max_length=512, description="a reflection approval token")


class ReflectTraceResult(Result):
    action_id: str
    trace: dict[str, Any]


def _store(call: Any, p: Any) -> Any:
    opener = getattr(call.env, "reflection_at", None)
    if getattr(p, "store", None) is not None and opener is not None:
        return opener(p.store)
    store = getattr(call.env, "reflection", None)
    if store is None:
        raise OperationError("invalid_params", "which receipt log? give 'store' (receipts.sqlite)", ["params", "store"])
    return store


@operation("reflect.approve", ReflectApproveParams, ReflectApproveResult,
           summary="issue a reflection approval: a token that lets a reviewer read one action's raw trace",
           doors={Door.CLI, Door.TOOLBUS, Door.MCP}, needs=Needs(files=True, store=True), roles={"local", "internal"},
           approves=True, cli_positional=("action_id",), door_only={Door.TOOLBUS: ("store",), Door.MCP: ("store",)},
           renames={Door.CLI: {"action_id": "action"}})
def approve(call: Any, p: ReflectApproveParams) -> ReflectApproveResult:
    token = _store(call, p).issue_approval(p.action_id, p.reviewer)
    return ReflectApproveResult(action_id=p.action_id, reviewer=p.reviewer, approval=token)


@operation("reflect.trace", ReflectParams, ReflectTraceResult,
           summary="the raw trace of an action, with a reflection approval (internal reviewers)",
           doors={Door.TOOLBUS}, roles={"internal"})
def trace(call: Any, p: ReflectParams) -> ReflectTraceResult:
    reader = getattr(call.env, "read_trace", None)
    found = reader(p.action_id, p.approval) if reader is not None else _store(call, p).read(p.action_id, p.approval)
    if found is None:
        raise OperationError("forbidden", "no trace for this approval (refused, or none stored)", ["params"])
    return ReflectTraceResult(action_id=p.action_id, trace=found)
