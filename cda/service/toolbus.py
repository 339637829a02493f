"""The WebSocket ToolBus (``/toolbus``, spec §7.1): control frames in, answers out.

A client authenticates once, when it connects (``Authorization: Bearer <token>``, or
``?token=`` for a browser, which cannot set headers on a WebSocket); an unknown token is let in
only to be closed with code **1008** (policy violation) and a receipt. Then every text frame is
one :class:`~cda.service.protocol.Request`, answered by a frame with the same ``id``:
``result`` or ``error: {code, message, path}``. Frames and params are validated by the pydantic
models the committed schemas come from (``schemas/toolbus/``).

Methods: ``actions.start|cancel|approve|deny|get`` for everyone, and for sub-actions
``actions.refresh`` (ask a sub-action's provider again: a new revision, ``update_available`` to
the actions that bound an older one) and ``actions.accept_update`` (a structure revision); ``reflect.trace`` (the raw trace,
read-only) for the internal profile with a reflection approval; ``investigate.start|observe|status|
history|undo|close`` (an investigation session, :mod:`~cda.service.investigations`); ``debug.*`` only when the server
runs with ``--debug`` and for the internal profile. There is no ``cda.*`` namespace: to everyone
else those names do not exist (``unknown_method``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from cda.errors import CDAError
from cda.service.actions import ActionManager, EdgeError
from cda.service.auth import AuthConfig, Principal
from cda.service.investigations import desk_for
from cda.service.protocol import (
    METHODS,
    AcceptParams,
    ActionRef,
    ApprovalParams,
    ErrorBody,
    ErrorFrame,
    ReflectParams,
    Request,
    ResultFrame,
    StartParams,
    valid_frame_id,
)

__all__ = ["MAX_FRAME", "toolbus_endpoint"]

MAX_FRAME = 1 << 20  # bytes: a CDAInputs larger than a megabyte is not a control message
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _error(frame_id: Any, code: str, message: str, path: list[str | int] | None = None) -> str:
    return ErrorFrame(id=frame_id if valid_frame_id(frame_id) else None,
                      error=ErrorBody(code=code, message=message, path=path or [])).model_dump_json()  # type: ignore[arg-type]


def _validation(frame_id: Any, exc: ValidationError, prefix: list[str | int]) -> str:
    first = exc.errors()[0]
    path = [*prefix, *first["loc"]]
    return _error(frame_id, "invalid_params" if prefix else "invalid_frame", f"{first['msg']}", path)


def toolbus_endpoint(state: Callable[[], Any]) -> Callable[[WebSocket], Any]:
    """The ``/toolbus`` handler over the app's state (auth, actions, debug flag)."""

    async def endpoint(ws: WebSocket) -> None:
        st = state()
        auth: AuthConfig = st.auth
        manager: ActionManager = st.manager
        token = None
        header = ws.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
        token = token or ws.query_params.get("token")
        await ws.accept()
        client = ws.client.host if ws.client else ""
        who = auth.principal(token)
        if auth.open and client not in LOOPBACK:
            who = None
        if who is None:
            await anyio.to_thread.run_sync(manager.receipt, "toolbus", "auth.refused",
                                           {"client": client, "token_given": bool(token)},
                                           {"close_code": 1008}, "denied")
            await ws.close(code=1008, reason="unknown token")
            return
        try:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:  # a binary frame: answered, the socket kept
                    await ws.send_text(_error(None, "invalid_frame", "a binary frame: send JSON as a text frame"))
                    continue
                await ws.send_text(await _answer(text, who, st))
        except WebSocketDisconnect:
            return

    return endpoint


INVESTIGATE_THREADS = 4  # investigate.* gets its own few threads: slow ones never stall actions or streams
_limiters: dict[int, anyio.CapacityLimiter] = {}


def _investigate_limiter() -> anyio.CapacityLimiter:
    """The ``investigate.*`` threads of the running event loop (apart from anyio's default 40)."""
    import asyncio

    key = id(asyncio.get_running_loop())
    if key not in _limiters:
        _limiters.clear()  # one server, one loop (a test's new loop starts afresh)
        _limiters[key] = anyio.CapacityLimiter(INVESTIGATE_THREADS)
    return _limiters[key]


async def _answer(text: str, who: Principal, st: Any) -> str:
    if len(text) > MAX_FRAME:
        return _error(None, "invalid_frame", f"frame larger than {MAX_FRAME} bytes")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return _error(None, "invalid_frame", f"not JSON: {exc}")
    except RecursionError:  # '[' * 200000: deeper than the parser goes
        return _error(None, "invalid_frame", "not JSON this server reads: nested too deeply")
    frame_id = raw.get("id") if isinstance(raw, dict) else None
    try:
        request = Request.model_validate(raw)
    except ValidationError as exc:
        return _validation(frame_id, exc, [])
    method = request.method
    namespace = method.split(".", 1)[0]
    allowed = method in METHODS and (namespace != "reflect" or who.profile == "internal")
    if namespace == "debug" and st.debug and who.profile == "internal":
        return ResultFrame(id=request.id, result=_debug(method, st)).model_dump_json()
    if not allowed:
        return _error(request.id, "unknown_method", f"no method {method!r} for this client", ["method"])
    params_model, _ = METHODS[method]
    try:
        params: BaseModel = params_model.model_validate(request.params)
    except ValidationError as exc:
        return _validation(request.id, exc, ["params"])
    manager: ActionManager = st.manager
    try:
        result: BaseModel | dict[str, Any]
        if isinstance(params, StartParams):
            result = await anyio.to_thread.run_sync(manager.start, who, params.inputs, params.subactions,
                                                    params.escalation)
        elif isinstance(params, ApprovalParams):
            grant = method == "actions.approve"
            result = await anyio.to_thread.run_sync(manager.decide, who, params.action_id, params.approval, grant,
                                                    params.reason)
        elif isinstance(params, ReflectParams):
            trace = await anyio.to_thread.run_sync(manager.read_trace, params.action_id, params.approval)
            if trace is None:
                raise EdgeError("forbidden", "no trace for this approval (refused, or none stored)", ["params"])
            result = {"action_id": params.action_id, "trace": trace}
        elif isinstance(params, AcceptParams):
            result = await anyio.to_thread.run_sync(manager.accept_update, who, params.action_id, params.update)
        elif isinstance(params, ActionRef) and method == "actions.refresh":
            result = await anyio.to_thread.run_sync(manager.refresh, who, params.action_id)
        elif isinstance(params, ActionRef) and method == "actions.cancel":
            result = await anyio.to_thread.run_sync(manager.cancel, who, params.action_id)
        elif isinstance(params, ActionRef):
            result = await anyio.to_thread.run_sync(manager.get, params.action_id, who)
        elif namespace == "investigate":  # investigations.py: each call in a worker thread
            result = await anyio.to_thread.run_sync(lambda: desk_for(manager.db).call(who, method, params),
                                                    limiter=_investigate_limiter())
        else:  # pragma: no cover - METHODS and this dispatch are kept together
            return _error(request.id, "unknown_method", f"no method {method!r}", ["method"])
    except EdgeError as exc:
        return _error(request.id, exc.code, str(exc), exc.path)
    except CDAError as exc:  # the store or a provider failed: the reason, not a dropped socket
        return _error(request.id, "internal", str(exc).replace(str(manager.db), manager.db.name))
    except sqlite3.Error as exc:
        return _error(request.id, "internal", f"the store cannot be read ({type(exc).__name__})")
    body = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    return ResultFrame(id=request.id, result=body).model_dump_json()


def _debug(method: str, st: Any) -> dict[str, Any]:
    """The internal debug namespace (``--debug``): what the hub holds, nothing that writes."""
    hub = st.hub
    return {"method": method, "topics": {t: len(s) for t, s in hub.topics.items()}, "live": sorted(hub.live),
            "dropped": hub.dropped}
