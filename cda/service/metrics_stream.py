"""The service's ``metrics`` topic (SSE, ``GET /streams/metrics``): each finished run's spec §10
metrics as it ends, with the rolling SLO status.

*Messages.* The stream opens with ``retry:`` and one ``slo_status`` message (no id): the rolling
status now. Then one ``action_metrics`` message per run that ends: ``id`` = the run's key in the
store (the rowid of its terminal event, which only grows), ``data`` = ``{"run", "action_id",
"attempt", "status", "ended_at", "metrics", "slo", "window"}`` where ``metrics`` is the run's
:class:`~cda.contracts.metrics.ActionMetrics` (null for a run that recorded none) and ``slo`` the
three SLOs judged over the rolling window *including* this run (as ``cda metrics`` judges them;
at most 20 runs over a target are named; runs read together share one judgement, made once, in
a worker thread, after the last of them). A client that reconnects with ``Last-Event-ID`` gets
the runs that ended after it (at most :data:`REPLAY_MAX`, from the store, each with the status
as last judged), then the live ones.

*Rolling window.* The runs that ended in the last :attr:`MetricsFeed.window_s` seconds (one
hour), at most :attr:`MetricsFeed.max_runs` (1000) of them.

*Woken by the writer.* The :class:`~cda.service.streams.Hub` calls :meth:`MetricsFeed.poke`
when it publishes a terminal event; one task (:meth:`MetricsFeed.run`) then reads the new
terminal rows once for every subscriber (nothing is read while nobody listens). Runs written
by another process (``cda run --out`` on the same file) are picked up by the same task every
:attr:`MetricsFeed.watch_s` while someone listens. A subscriber that falls more than
:attr:`MetricsFeed.buffer` messages behind is dropped (it resumes from the store).

*Who may read it.* The same token rules as the action streams (401 without a known token under
``--auth``); because the topic carries every action's numbers (claims included), under
``--auth`` only the ``internal`` profile may read it (403 for a partner). OpenTelemetry export
(``--otel-endpoint``, :mod:`cda.adapters.otel_export`) is fed from the same reads.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from cda.actions.metrics_report import summarise
from cda.actions.metrics_runs import RunMetrics, StoreRuns, read_runs
from cda.adapters.auth import AuthConfig
from cda.errors import CDAError
from cda.service.streams import RETRY_MS, EventStreamResponse, parse_last_event_id, stream_principal

__all__ = ["REPLAY_MAX", "MetricsFeed", "metrics_endpoint"]

REPLAY_MAX = 1000
"""The most runs a reconnecting client is replayed from the store."""

_NAMED = 20


def _read(db: Path, since: float | None, after: int, limit: int | None) -> StoreRuns:
    if not db.exists():
        return StoreRuns(last_key=after)
    return read_runs(db, since=since, after_key=after, limit=limit)


class _Listener:
    __slots__ = ("cursor", "dropped", "wake")

    def __init__(self, cursor: int) -> None:
        self.cursor = cursor
        self.wake = asyncio.Event()
        self.dropped = False


class MetricsFeed:
    """The rolling window and the recent ``action_metrics`` messages; lives on the server's loop."""

    def __init__(self, db: Path, *, window_s: float = 3600.0, max_runs: int = 1000, buffer: int = 512,
                 watch_s: float = 1.0, observers: list[Callable[[RunMetrics], None]] | None = None) -> None:
        self.db = db
        self.window_s = window_s
        self.max_runs = max_runs
        self.buffer = buffer
        self.watch_s = watch_s
        self.window: deque[RunMetrics] = deque()
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=buffer)
        self.key: int | None = None  # the last run read (None: not primed yet)
        self.evicted = 0  # the key of the last message pushed out of ``recent``
        self.current: dict[str, Any] = self._status()  # the rolling status, as last judged
        self.listeners: set[_Listener] = set()
        self.dirty = asyncio.Event()
        self.closing = asyncio.Event()
        self.lock = asyncio.Lock()
        self.observers = observers or []  # called with each new run (the OpenTelemetry export)

    # -- the writer's side -------------------------------------------------------------------
    def poke(self, topic: str = "") -> None:
        """A run ended (the Hub published a terminal event): read it if anyone listens."""
        if self.listeners or self.observers:
            self.dirty.set()

    def close(self) -> None:
        self.closing.set()
        for listener in self.listeners:
            listener.wake.set()

    async def run(self) -> None:
        """The one task that reads the store for every listener: on a poke, or every ``watch_s``.

        With an exporter the window is primed first, so every run that ends from now on is
        exported; without one, nothing is read until the first listener comes (a server nobody
        watches pays nothing)."""
        if self.observers:
            try:
                await self.prime()
            except CDAError:
                pass  # not readable now: the first refresh primes it
        while not self.closing.is_set():
            try:
                await asyncio.wait_for(self.dirty.wait(), self.watch_s)
            except TimeoutError:
                if not self.listeners:
                    continue
            self.dirty.clear()
            try:
                await self.refresh()
            except (CDAError, sqlite3.Error):
                await asyncio.sleep(self.watch_s)  # the file was replaced meanwhile: the streams say so on reconnect

    async def prime(self) -> None:
        """Fill the rolling window from the store (once: at the first listener, or at start with an
        exporter). The reading and the judging run in a worker thread, never on the event loop."""
        async with self.lock:
            if self.key is None:
                await anyio.to_thread.run_sync(self._prime)

    def _prime(self) -> None:
        found = _read(self.db, time.time() - self.window_s, 0, self.max_runs)
        latest = _read(self.db, None, found.last_key, None)  # ended between the two reads
        self.window.extend([*found.runs, *latest.runs])
        self._evict()
        self.current = self._status()
        self.key = latest.last_key

    async def refresh(self) -> None:
        """Read the runs that ended since the last read; queue one message each and wake listeners."""
        await self.prime()
        async with self.lock:
            runs, messages = await anyio.to_thread.run_sync(self._absorb)
            for run, message in zip(runs, messages):
                if len(self.recent) == self.recent.maxlen:
                    self.evicted = self.recent[0][0]  # the oldest message goes: a reader behind it is dropped
                self.recent.append((run.key, message))
                for observe in self.observers:
                    observe(run)
        if runs:
            for listener in list(self.listeners):
                listener.wake.set()

    def _absorb(self) -> tuple[list[RunMetrics], list[bytes]]:
        """(worker thread) The new runs into the window, judged once, and their messages."""
        assert self.key is not None
        found = _read(self.db, None, self.key, None)
        if not found.runs:
            return [], []
        self.window.extend(found.runs)
        self._evict()
        self.current = self._status()
        self.key = found.last_key
        return found.runs, [self.message(run) for run in found.runs]

    def _evict(self) -> None:
        cutoff = time.time() - self.window_s
        while self.window and (len(self.window) > self.max_runs or
                               (self.window[0].ended_at is not None and self.window[0].ended_at < cutoff)):
            self.window.popleft()

    # -- messages ------------------------------------------------------------------------------
    def _status(self) -> dict[str, Any]:
        """The rolling SLO status over the window, as the ``slo``/``window`` fields carry it."""
        report = summarise(list(self.window))
        slos = []
        for slo in report.slos:
            doc = slo.as_json()
            for key in ("runs_over_target", "breaking_runs"):
                doc[key] = doc[key][:_NAMED]
            slos.append(doc)
        return {"slo": slos, "window": {"seconds": self.window_s, "max_runs": self.max_runs, "runs": report.runs,
                                        "statuses": dict(sorted(report.statuses.items()))}}

    def message(self, run: RunMetrics) -> bytes:
        """The ``action_metrics`` message of ``run``, with the rolling status as last judged."""
        data = {"run": run.name, "action_id": run.action_id, "attempt": run.attempt, "status": run.status,
                "ended_at": run.ended_at,
                "metrics": None if run.metrics is None else run.metrics.model_dump(mode="json"), **self.current}
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return f"id: {run.key}\nevent: action_metrics\ndata: {text}\n\n".encode()

    def snapshot(self) -> bytes:
        text = json.dumps(self.current, sort_keys=True, separators=(",", ":"))
        return f"event: slo_status\ndata: {text}\n\n".encode()

    # -- the readers' side -----------------------------------------------------------------------
    async def follow(self, last: int | None, keepalive_s: float) -> AsyncIterator[bytes]:
        """One subscriber's messages: the opening, a replay after ``last``, then live."""
        await self.prime()
        assert self.key is not None
        listener = _Listener(self.key)
        self.listeners.add(listener)
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            if last is not None and last < listener.cursor:
                found = await anyio.to_thread.run_sync(_read, self.db, None, last, REPLAY_MAX)
                replay = [r for r in found.runs if r.key <= listener.cursor]
                if replay:
                    yield b"".join(self.message(r) for r in replay)
            yield self.snapshot()
            while not self.closing.is_set():
                if not any(key > listener.cursor for key, _ in self.recent):
                    listener.wake.clear()
                    try:
                        await asyncio.wait_for(listener.wake.wait(), keepalive_s)
                    except TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                if self.closing.is_set():
                    return
                if listener.cursor < self.evicted:
                    return  # too slow: messages went before it read them; it resumes by Last-Event-ID
                pending = [(k, m) for k, m in self.recent if k > listener.cursor]
                if pending:
                    listener.cursor = pending[-1][0]
                    yield b"".join(m for _, m in pending)
        finally:
            self.listeners.discard(listener)


def metrics_endpoint(feed_of: Callable[[], MetricsFeed | None], keepalive_s: float,
                     auth: AuthConfig | None = None) -> Callable[[Request], Awaitable[Response]]:
    """The handler of ``/streams/metrics`` (GET, HEAD, OPTIONS)."""

    async def endpoint(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers={"Allow": "GET, HEAD, OPTIONS"})
        who, refused = stream_principal(request, auth)
        if refused is not None:
            return refused
        if who is not None and who.profile != "internal":
                return PlainTextResponse("the metrics topic carries every action's numbers: internal profile only\n",
                                         403)
        feed = feed_of()
        if feed is None:
            return PlainTextResponse("the server is starting\n", 503)
        raw = request.headers.get("last-event-id")
        if raw is None:
            raw = request.query_params.get("last_event_id")
        try:  # the topic's ids are plain numbers (no attempts): "attempt:seq" is not one of them
            parsed = parse_last_event_id(raw)
            if parsed is not None and ":" in (raw or ""):
                raise ValueError(f"Last-Event-ID of the metrics topic is a whole number, got {(raw or '')[:40]!r}")
        except ValueError as exc:
            return PlainTextResponse(f"{exc}\n", 400)
        last = None if parsed is None else parsed[1]
        if request.method == "HEAD":
            return Response(status_code=200, media_type="text/event-stream; charset=utf-8",
                            headers={"Cache-Control": "no-cache"})
        try:
            await feed.prime()
        except CDAError as exc:  # the message names the server's file: the client gets its kind only
            return PlainTextResponse(f"cannot read the store ({type(exc).__name__})\n", 500)
        return EventStreamResponse(feed.follow(last, keepalive_s), {})

    return endpoint
