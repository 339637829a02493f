"""SSE streams of actions (spec §7.2): ``GET /streams/actions/{id}``, resumable by ``Last-Event-ID``.

Each event is one SSE message: ``id`` = its seq, ``event`` = its type (the §7.2 names), ``data``
= its JSON; the first line of a stream is ``retry:``. A stream sends what is stored after the
client's ``Last-Event-ID``, then follows the action live until its terminal event and ends.

*Woken by the writer.* The :class:`Hub` keeps, per topic, the subscribers' bounded buffers; the
thread running an action publishes each event after storing it (``publish_threadsafe``), which
wakes exactly the subscribers of that topic — no thread and no poll per stream. A subscriber
registers before reading the store, and drops ids it already sent, so nothing falls between the
stored backlog and the live tail. Actions written by another process (``cda run --out`` on the
same file) are followed by one shared watcher task for all such topics, which reads each topic
once whole, then only what follows its (attempt, seq) cursor.

*Slow readers.* A subscriber whose buffer fills (it does not read) is dropped: its buffer is
freed and its stream ends; the client resumes later with ``Last-Event-ID`` from the store.

*Updates after the end.* The updates offered to an action that has ended
(``action_update_available``, docs/service.md "Sub-actions") are stored after its terminal event
and sent with the rest of the backlog; a stream ends at the terminal event as before, unless the
client asked for ``?updates=1``: then a finished attempt is followed past it for the updates
offered to it (until the client leaves, the server stops or a newer attempt begins).

*Every stream ends.* An unknown action, and a finished one resumed at or past its last
event, is **204 No Content** (the SSE specification's "stop reconnecting"). An attempt older than
the action's latest is over, with or without a terminal event (a run killed mid-way, then run
again): its stored rest is sent and the stream ends (204 when there is none). A stream following
an attempt live ends at its terminal event, or when a newer attempt begins. An attempt begun but
with no event yet (queued) is followed. A ``Last-Event-ID`` that is not an event id (below) is a
400 that says so.

*Legacy aliases* (spec §13, off by default; ``cda serve --legacy-aliases``, for one CalVer
window): each event is preceded by its ``wu_*`` alias (:func:`legacy_alias`), for consumers of
the work-unit protocol that have not yet switched to ``action_*``.

*Attempts.* A stream is one attempt (one run) of its action: by default the latest, or the one
``?attempt=N`` names. Event ids are the seq for a first attempt and ``N:seq`` for attempt N > 1,
so a ``Last-Event-ID`` names its attempt: a client that followed an attempt resumes that attempt
(its rest, or 204 when it had it all), even when the action has been run again meanwhile, and a
stream never mixes the events of two attempts.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from cda.adapters.auth import AuthConfig, Principal
from cda.adapters.http_guard import presented
from cda.service.event_reads import POST_TERMINAL, TERMINAL, StoredEvent, latest_attempt, read_after, read_stream

__all__ = ["EventStreamResponse", "Hub", "Subscriber", "stream_endpoint"]

ACTION_ID = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")
MAX_ID = 2**63 - 1
MAX_ATTEMPT = 2**31 - 1
RETRY_MS = 1000


class Subscriber:
    """One open stream: a bounded buffer the writer fills and an event that wakes the reader."""

    __slots__ = ("attempt", "buffer", "cursor", "dropped", "limit", "wake")

    def __init__(self, limit: int) -> None:
        self.buffer: deque[StoredEvent] = deque()
        self.cursor = -1  # the last seq this subscriber has sent
        self.attempt: int | None = None  # the attempt it follows (None: the first one it is sent)
        self.limit = limit
        self.wake = asyncio.Event()
        self.dropped = False


class Hub:
    """Topics (action ids) -> subscribers; lives on the server's event loop."""

    def __init__(self, db: Path, buffer: int = 512, watch_s: float = 0.25) -> None:
        self.db = db
        self.buffer = buffer
        self.watch_s = watch_s
        self.topics: dict[str, set[Subscriber]] = {}
        self.live: set[str] = set()  # actions running in this process
        self.seen: dict[str, tuple[int, int]] = {}  # topic -> the last (attempt, seq) published to it
        self.closing = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.dropped = 0  # slow readers dropped since start
        self.on_finish: list[Callable[[str], None]] = []  # told each terminal event (the metrics topic)

    def subscribe(self, topic: str) -> Subscriber:
        sub = Subscriber(self.buffer)
        self.topics.setdefault(topic, set()).add(sub)
        return sub

    def unsubscribe(self, topic: str, sub: Subscriber) -> None:
        subs = self.topics.get(topic)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.topics[topic]

    def publish(self, topic: str, event: StoredEvent) -> None:
        """Hand ``event`` to every subscriber of ``topic`` (on the loop); drop a full one."""
        if event.type in TERMINAL:
            self.live.discard(topic)
            for hook in self.on_finish:
                hook(topic)
        if (event.attempt, event.seq) > self.seen.get(topic, (0, -1)):
            self.seen[topic] = (event.attempt, event.seq)
        for sub in list(self.topics.get(topic, ())):
            if len(sub.buffer) >= sub.limit:
                sub.dropped = True
                sub.buffer.clear()
                self.topics[topic].discard(sub)
                self.dropped += 1
            else:
                sub.buffer.append(event)
            sub.wake.set()

    def publish_threadsafe(self, topic: str, event: StoredEvent) -> None:
        self.loop.call_soon_threadsafe(self.publish, topic, event)

    def close(self) -> None:
        """Server stopping: every open stream ends now (clients resume from the store)."""
        self.closing.set()
        for subs in self.topics.values():
            for sub in subs:
                sub.wake.set()

    async def watch_external(self) -> None:
        """One task for all topics with readers that no action in this process writes."""
        while not self.closing.is_set():
            await asyncio.sleep(self.watch_s)
            for topic, subs in list(self.topics.items()):
                if topic in self.live or not subs:
                    continue
                after = self.seen.get(topic)
                if after is None:  # first sight: its latest attempt from the start (each reader drops what it sent)
                    events = await anyio.to_thread.run_sync(read_stream, self.db, topic, None)
                    after = (0, -1)
                    self.seen[topic] = after
                else:  # after the cursor: the rest of that attempt and any newer one
                    events = await anyio.to_thread.run_sync(read_after, self.db, topic, *after)
                for event in events:
                    if (event.attempt, event.seq) > after:
                        self.publish(topic, event)
            for topic in [t for t in self.seen if t not in self.topics]:
                del self.seen[topic]  # nobody reads it any more


def _message(event: StoredEvent, legacy: bool = False) -> bytes:
    """One SSE message; with ``legacy`` (spec §13, ``cda serve --legacy-aliases``) its ``wu_*``
    alias first (:func:`legacy_alias`)."""
    text = f"id: {event.sse_id}\nevent: {event.type}\ndata: {event.data}\n\n"
    return (legacy_alias(event) + text).encode() if legacy else text.encode()


def legacy_alias(event: StoredEvent) -> str:
    """The ``wu_*`` message a legacy work-unit consumer reads for ``event`` (spec §13): the same
    data, its ``type`` renamed (``action_started`` -> ``wu_started``) and ``work_unit_id`` = the
    action's id. It carries no ``id:`` field, so a client's ``Last-Event-ID`` stays the
    ``action_*`` event's, which follows it: a client cut off between the two is sent both again
    (aliases are at-least-once; the ``action_*`` events stay exactly-once)."""
    data = json.loads(event.data)
    name = "wu_" + event.type.removeprefix("action_")
    if isinstance(data, dict):
        data = {**data, "type": name, "work_unit_id": data.get("action_id")}
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'), sort_keys=True)}\n\n"


class EventStreamResponse(Response):
    """``text/event-stream`` from an async iterator of messages; ends when the client leaves."""

    def __init__(self, messages: AsyncIterator[bytes], headers: dict[str, str]) -> None:
        self.status_code = 200
        self.background = None
        all_headers = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
                       "x-accel-buffering": "no", **{k.lower(): v for k, v in headers.items()}}
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in all_headers.items()]
        self.messages = messages  # no content-length: the body is open-ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async with anyio.create_task_group() as group:
            async def pump() -> None:
                try:
                    async for chunk in self.messages:
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                except OSError:
                    pass  # the client went away mid-write
                group.cancel_scope.cancel()

            async def watch() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(pump)
            group.start_soon(watch)


def parse_last_event_id(raw: str | None) -> tuple[int, int] | None:
    """The client's cursor as (attempt, seq): ``seq`` (attempt 1) or ``attempt:seq``; ValueError
    (with the reason) for anything but an id in range."""
    if raw is None or raw.strip() == "":
        return None
    text = raw.strip()
    match = re.fullmatch(r"(?:([0-9]{1,10}):)?(-?[0-9]{1,19})", text)
    if match is None:
        raise ValueError(f"Last-Event-ID must be an event id (a whole number, or attempt:number), got {raw[:40]!r}")
    attempt, value = int(match.group(1) or 1), int(match.group(2))
    if value < -1 or value > MAX_ID:
        raise ValueError(f"Last-Event-ID must be between -1 and {MAX_ID}, got {match.group(2)}")
    if not 1 <= attempt <= MAX_ATTEMPT:
        raise ValueError(f"Last-Event-ID: the attempt must be between 1 and {MAX_ATTEMPT}, got {match.group(1)}")
    return attempt, value


def _updates_param(raw: str | None) -> bool:
    """``?updates=1``: follow a finished attempt for the updates offered to it; ValueError for
    anything but ``1``/``true``/``0``/``false``."""
    if raw is None or raw in ("0", "false"):
        return False
    if raw in ("1", "true"):
        return True
    raise ValueError(f"updates must be 1, true, 0 or false, got {raw[:40]!r}")


def _attempt_param(raw: str | None) -> int | None:
    """``?attempt=N``: the attempt to stream (None: the latest); ValueError for anything else."""
    if raw is None:
        return None
    if not re.fullmatch(r"[0-9]{1,10}", raw) or not 1 <= int(raw) <= MAX_ATTEMPT:
        raise ValueError(f"attempt must be a whole number between 1 and {MAX_ATTEMPT}, got {raw[:40]!r}")
    return int(raw)


def stream_principal(request: Request, auth: AuthConfig | None) -> tuple[Principal | None, Response | None]:
    """Who a stream request is, by the token it presents (``Authorization: Bearer``, or ``?token=``
    for a browser's ``EventSource``); with ``--auth``, an unknown or missing token is the 401 to
    answer. Without ``--auth`` every client is the same anonymous partner (None)."""
    if auth is None or auth.open:
        return None, None
    who = auth.principal(presented(request.scope, request.headers))
    if who is None:
        return None, PlainTextResponse("a known token is required (Authorization: Bearer, or ?token=)\n", 401,
                                       headers={"WWW-Authenticate": "Bearer"})
    return who, None


def stream_endpoint(hub_of: Callable[[], Hub], keepalive_s: float, auth: AuthConfig | None = None,
                    owners: Callable[[], Any] | None = None,
                    legacy_aliases: bool = False) -> Callable[[Request], Awaitable[Response]]:
    """The handler of ``/streams/actions/{action_id}`` (GET, HEAD, OPTIONS).

    With ``--auth`` a stream needs a known token too (``Authorization: Bearer`` or ``?token=``,
    for a browser's ``EventSource``, which cannot set headers): 401 without one; and the stream
    of an action another partner started is answered as an unknown one (204), as the ToolBus
    answers ``not_found`` (``owners()``: what has ``visible(principal, action_id)``, the
    :class:`~cda.service.actions.ActionManager`)."""

    async def endpoint(request: Request) -> Response:
        hub = hub_of()
        if request.method == "OPTIONS":
            return Response(status_code=204, headers={"Allow": "GET, HEAD, OPTIONS"})
        who, refused = stream_principal(request, auth)
        if refused is not None:
            return refused
        action_id = request.path_params["action_id"]
        if not ACTION_ID.match(action_id):
            return PlainTextResponse("no such stream: an action id is 1-200 of A-Z a-z 0-9 _ . : -\n", 404)
        manager = owners() if owners is not None and auth is not None and not auth.open else None
        if manager is not None and not await anyio.to_thread.run_sync(manager.visible, who, action_id):
            return Response(status_code=204)  # another partner's action: as an unknown one
        raw = request.headers.get("last-event-id")
        if raw is None:
            raw = request.query_params.get("last_event_id")
        try:
            cursor = parse_last_event_id(raw)
            pinned = _attempt_param(request.query_params.get("attempt"))
            updates = _updates_param(request.query_params.get("updates"))
        except ValueError as exc:
            return PlainTextResponse(f"{exc}\n", 400)
        if cursor is not None and pinned is not None and cursor[0] != pinned:
            return PlainTextResponse(f"Last-Event-ID names attempt {cursor[0]}, the URL attempt {pinned}\n", 400)
        last = None if cursor is None else cursor[1]
        if cursor is not None:
            pinned = cursor[0]  # resume the attempt the client followed, whatever ran since
        sub = hub.subscribe(action_id)
        sub.cursor = -1 if last is None else last
        sub.attempt = pinned
        try:
            latest = await anyio.to_thread.run_sync(latest_attempt, hub.db, action_id)
            backlog = await anyio.to_thread.run_sync(read_stream, hub.db, action_id, last, pinned)
        except sqlite3.Error as exc:  # the file was replaced or damaged: say so, without the server's path
            hub.unsubscribe(action_id, sub)
            return PlainTextResponse(f"cannot read the event store: {type(exc).__name__}: {exc}\n", 500)
        except BaseException:
            hub.unsubscribe(action_id, sub)
            raise
        if backlog:
            sub.cursor, sub.attempt = backlog[-1].seq, backlog[-1].attempt
        # an attempt older than the latest is over, ended or not (a run killed before its terminal
        # event, then run again): its backlog, then the end; it is never followed live
        older = pinned is not None and latest is not None and pinned < latest
        # an attempt has ended when its terminal event, or an update offered after it, is there
        finished = any(e.type in TERMINAL or e.type in POST_TERMINAL for e in backlog)
        if not backlog:
            known = [] if older else await anyio.to_thread.run_sync(read_stream, hub.db, action_id, None, pinned)
            finished = bool(known) and (known[-1].type in TERMINAL or known[-1].type in POST_TERMINAL)
            # nothing to send: follow only an attempt still going (or begun, with no event yet, here),
            # or, with ?updates=1, one that has ended (for the updates offered to it)
            if older or (not known and action_id not in hub.live) or (finished and not updates):
                hub.unsubscribe(action_id, sub)
                return Response(status_code=204)  # unknown, over, or finished with nothing after the cursor
        ended = older or (finished and not updates)
        if request.method == "HEAD":
            hub.unsubscribe(action_id, sub)
            return Response(status_code=200, media_type="text/event-stream; charset=utf-8",
                            headers={"Cache-Control": "no-cache"})
        return EventStreamResponse(_follow(hub, action_id, sub, backlog, last, ended, keepalive_s, legacy_aliases,
                                           updates), {})

    return endpoint


async def _follow(hub: Hub, topic: str, sub: Subscriber, backlog: list[StoredEvent], last: int | None,
                  ended: bool, keepalive_s: float, legacy: bool = False,
                  updates: bool = False) -> AsyncIterator[bytes]:
    """The stream's messages: the backlog, then the live tail of its attempt until its terminal
    event; with ``updates``, past it (the updates offered to it) until a newer attempt begins,
    the server stops or the client leaves."""
    sent = sub.cursor = -1 if last is None else last
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        if backlog:
            yield b"".join(_message(e, legacy) for e in backlog)
            sent = sub.cursor = backlog[-1].seq
        if ended:
            return
        while not hub.closing.is_set():
            if not sub.buffer:
                sub.wake.clear()
                try:
                    await asyncio.wait_for(sub.wake.wait(), keepalive_s)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
            if sub.dropped or hub.closing.is_set():
                return  # too slow: the client resumes from the store with its Last-Event-ID
            chunk: list[bytes] = []
            done = False
            while sub.buffer:
                event = sub.buffer.popleft()
                if sub.attempt is None:
                    sub.attempt = event.attempt
                if event.attempt != sub.attempt:
                    if event.attempt > sub.attempt or (event.type in TERMINAL and not updates):
                        done = True  # a newer attempt began (ours is over), or the one running ended
                        break
                    continue
                if event.seq <= sent:
                    continue  # already sent from the backlog
                chunk.append(_message(event, legacy))
                sent = event.seq
                if event.type in TERMINAL and not updates:
                    done = True
                    break
            if chunk:
                yield b"".join(chunk)
                sub.cursor = sent
            if done:
                return
    finally:
        hub.unsubscribe(topic, sub)
