"""The WebSocket ToolBus (``/toolbus``, spec §7.1): control frames in, answers out.

A client authenticates once, when it connects (``Authorization: Bearer <token>``, or
``?token=`` for a browser, which cannot set headers on a WebSocket; the Host/Origin guard takes it
out of the query before anything logs it); an unknown token is let in only to be closed with code
**1008** (policy violation) and a receipt, and past a few such connects a client address is
answered 429 without one (:class:`~cda.adapters.http_guard.RefusalLimiter`). Then every text frame is
one :class:`~cda.service.protocol.Request`, answered by a frame with the same ``id``:
``result`` or ``error: {code, message, path}``. Frames and params are validated by the pydantic
models the committed schemas come from (``schemas/toolbus/``).

Methods are the operation registry's for this door (:mod:`cda.operations`; docs/service.md lists
them with who may call each): each frame's params are validated by the operation's model, the gate
decides for the caller's principal, and the operation runs in a worker thread. An operation not
open to the caller's role does not exist for it (``unknown_method``); another refusal is
``forbidden`` with the ``path`` of the parameter at fault; every refusal is a receipt in the
server's log. ``debug.*`` only when the server runs with ``--debug`` and for the internal profile.
There is no ``cda.*`` namespace.
"""

from __future__ import annotations

import collections
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from pydantic import BaseModel, ValidationError
from starlette.responses import PlainTextResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from cda.adapters.auth import AuthConfig
from cda.adapters.http_guard import is_loopback, presented
from cda.contracts.deadline import cancel_scope
from cda.contracts.json_numbers import exact_float
from cda.contracts.locations import problem_message
from cda.errors import AccessDenied, CDAError, DSLError
from cda.operations import Door, Principal, Refused, invoke
from cda.operations.base import OperationError
from cda.service.actions import ActionManager
from cda.service.calls import STOP_GRACE_S, Calls
from cda.service.env import service_env
from cda.service.live import RECEIVED
from cda.service.protocol import METHODS, ErrorBody, ErrorFrame, Request, ResultFrame, valid_frame_id

__all__ = ["MAX_FRAME", "toolbus_endpoint"]

MAX_FRAME = 1 << 20  # bytes: a CDAInputs larger than a megabyte is not a control message


def _error(frame_id: Any, code: str, message: str, path: list[str | int] | None = None) -> str:
    return ErrorFrame(id=frame_id if valid_frame_id(frame_id) else None,
                      error=ErrorBody(code=code, message=message, path=path or [])).model_dump_json()  # type: ignore[arg-type]


def _validation(frame_id: Any, exc: ValidationError, prefix: list[str | int]) -> str:
    first = exc.errors()[0]
    path = [*prefix, *first["loc"]]
    return _error(frame_id, "invalid_params" if prefix else "invalid_frame", problem_message(first), path)


def toolbus_endpoint(state: Callable[[], Any]) -> Callable[[WebSocket], Any]:
    """The ``/toolbus`` handler over the app's state (auth, actions, debug flag)."""

    async def endpoint(ws: WebSocket) -> None:
        st = state()
        auth: AuthConfig = st.auth
        manager: ActionManager = st.manager
        token = presented(ws.scope, ws.headers)  # the guard took a ?token= out of the query (no log sees it)
        client = ws.client.host if ws.client else ""
        who = auth.principal(token)
        if auth.open and not is_loopback(client):
            who = None
        if who is None:
            skipped = st.refusals.admit(client)
            if skipped is None:  # a flood of refused connects: answered, not receipted one by one
                if "websocket.http.response" in ws.scope.get("extensions", {}):
                    await ws.send_denial_response(PlainTextResponse("too many refused connects\n", 429,
                                                                    headers={"Retry-After": "1"}))
                else:
                    await ws.close(code=1008)
                return
            await ws.accept()
            await anyio.to_thread.run_sync(manager.receipt, "toolbus", "auth.refused",
                                           {"client": client, "token_given": bool(token)},
                                           {"close_code": 1008, "not_receipted_before": skipped}, "denied")
            await ws.close(code=1008, reason="unknown token")
            return
        await ws.accept()
        waiting: collections.deque[tuple[Any, float]] = collections.deque()  # frames (and when read) sent while a call ran
        try:
            while True:
                message, read_at = waiting.popleft() if waiting else (await ws.receive(), time.monotonic())
                RECEIVED.set(read_at)  # TTFS from actions.start begins when its frame is read (queued ones too)
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:  # a binary frame: answered, the socket kept
                    await ws.send_text(_error(None, "invalid_frame", "a binary frame: send JSON as a text frame"))
                    continue
                answer = await _watched(ws, waiting, _answer(text, who, st))
                if answer is None:  # the client went away while its call ran: the call was cancelled
                    return
                await ws.send_text(answer)
        except WebSocketDisconnect:
            return

    return endpoint


async def _watched(ws: WebSocket, waiting: collections.deque[tuple[Any, float]], answer: Awaitable[str],
                   ) -> str | None:
    """``answer``, while the socket is read beside it: a disconnect cancels the call (its token
    stops the solver, :mod:`cda.service.calls`) and gives ``None``; frames sent meanwhile wait in
    ``waiting`` (at most :data:`MAX_WAITING`; more are answered ``conflict`` at once)."""
    done: list[str] = []
    async with anyio.create_task_group() as group:
        async def run() -> None:
            done.append(await answer)
            group.cancel_scope.cancel()  # the reader is not needed any more

        async def read() -> None:
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    waiting.append((message, time.monotonic()))
                    group.cancel_scope.cancel()
                    return
                if len(waiting) >= MAX_WAITING:
                    await ws.send_text(_error(None, "conflict", f"more than {MAX_WAITING} frames sent while a call "
                                                                "runs: this one was dropped; send it again"))
                    continue
                waiting.append((message, time.monotonic()))

        group.start_soon(run)
        group.start_soon(read)
    return done[0] if done else None


MAX_WAITING = 64  # frames a client may send ahead while its call runs (each is answered in turn)
PRODUCT_THREADS = 4  # investigate.*, guard.*, conduct.* get their own few threads: slow ones never stall actions
_limiters: dict[int, anyio.CapacityLimiter] = {}


def _product_limiter() -> anyio.CapacityLimiter:
    """The product methods' threads of the running event loop (apart from anyio's default 40)."""
    import asyncio

    key = id(asyncio.get_running_loop())
    if key not in _limiters:
        _limiters.clear()  # one server, one loop (a test's new loop starts afresh)
        _limiters[key] = anyio.CapacityLimiter(PRODUCT_THREADS)
    return _limiters[key]


async def _answer(text: str, who: Principal, st: Any) -> str:
    if len(text) > MAX_FRAME:
        return _error(None, "invalid_frame", f"frame larger than {MAX_FRAME} bytes")
    try:
        raw = json.loads(text, parse_float=exact_float)  # a number's digits kept: an Action's weight is exact
    except ValueError as exc:
        if "int_max_str_digits" in str(exc) or "Exceeds the limit" in str(exc):  # Python's words, not the client's
            return _error(None, "invalid_frame", f"not JSON this server reads: a number longer than "
                                                 f"{sys.get_int_max_str_digits()} digits")
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
    if namespace == "debug" and st.debug and who.role == "internal":
        return ResultFrame(id=request.id, result=_debug(method, st)).model_dump_json()
    if method not in METHODS:
        return _error(request.id, "unknown_method", f"no method {method!r} for this client", ["method"])
    manager: ActionManager = st.manager
    env = service_env(st)
    limiter = _product_limiter() if namespace not in ("actions", "reflect", "artifacts") else None

    calls: Calls = st.calls
    token = calls.begin(capped=limiter is not None)  # a product call has no budget of its own: the call wall
    ended = threading.Event()

    def call() -> BaseModel:
        try:
            with cancel_scope(token):
                return invoke(method, request.params, principal=who, door=Door.TOOLBUS, env=env,
                              base_dir=manager.db.parent, egress_cap=st.config.egress_cap, sink=env.sink)
        finally:
            ended.set()

    try:
        # abandoned on cancel only to hear of it at once: the thread is stopped by the token and waited for
        result = await anyio.to_thread.run_sync(call, limiter=limiter, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        token.cancel("cancelled: the client disconnected", "cancelled")  # a stopping server cancelled it first
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(ended.wait, STOP_GRACE_S)
        raise
    except ValidationError as exc:
        return _validation(request.id, exc, ["params"])
    except Refused as exc:
        if exc.need == "role":  # to anyone else those names do not exist
            return _error(request.id, "unknown_method", f"no method {method!r} for this client", ["method"])
        return _error(request.id, "forbidden", str(exc), ["params", *exc.path] if exc.path else ["method"])
    except OperationError as exc:
        return _error(request.id, exc.code, str(exc), exc.path)
    except AccessDenied as exc:  # refused where a file, code or egress was reached for (receipted by the gate)
        return _error(request.id, "forbidden", str(exc), ["params"])
    except DSLError as exc:
        where: list[str | int] = ["params"] + ([exc.line] if exc.line is not None else []) + \
            ([exc.column] if exc.line is not None and exc.column is not None else [])
        return _error(request.id, "invalid_params", f"{exc.kind}: {exc.message}", where)
    except CDAError as exc:  # the store or a provider failed: the reason, not a dropped socket
        code = "internal" if namespace == "actions" else "invalid_params"
        return _error(request.id, code, str(exc).replace(str(manager.db.parent) + "/", "").replace(
            str(manager.db), manager.db.name))
    except sqlite3.Error as exc:
        return _error(request.id, "internal", f"the store cannot be read ({type(exc).__name__})")
    finally:
        calls.end(token)
    return ResultFrame(id=request.id, result=result.model_dump(mode="json")).model_dump_json()


def _debug(method: str, st: Any) -> dict[str, Any]:
    """The internal debug namespace (``--debug``): what the hub holds, nothing that writes."""
    hub = st.hub
    return {"method": method, "topics": {t: len(s) for t, s in hub.topics.items()}, "live": sorted(hub.live),
            "dropped": hub.dropped}
