"""The ToolBus frames (spec §7.1): what a client sends over ``/toolbus`` and what it gets back.

A request is ``{id, method, params}``; the answer carries the same ``id`` and either ``result``
or ``error: {code, message, path}`` (``path``: where in the frame the fault is, as a list of keys
and indexes). Each method's params and result are a pydantic model here; the committed JSON
Schemas in ``schemas/toolbus/`` are generated from these models (:func:`toolbus_schemas`,
checked by a test), so a client in any language validates against the same contract the server
enforces. The methods and their models are the operation registry's (:mod:`cda.operations`): this
module adds the frames around them. There is no ``cda.*`` method: a CDA run is ``actions.start``
with ``ability: "cda"``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from cda.operations.actions import (
    AcceptParams,
    ActionGetResult,
    ActionRef,
    ApprovalParams,
    Escalation,
    RefreshResult,
    StartParams,
    StartResult,
    SubActionSpec,
)
from cda.operations.reflect import ReflectParams

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


def _methods() -> dict[str, tuple[type[BaseModel], type[BaseModel] | None]]:
    """Every ToolBus method: the registry's operations for this door (:mod:`cda.operations`)."""
    from cda.operations.registry import Door, for_door

    return {op.name: (op.params, op.result) for op in for_door(Door.TOOLBUS)}


#: method name -> (params model, result model), generated from the operation registry
METHODS: dict[str, tuple[type[BaseModel], type[BaseModel] | None]] = _methods()


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
