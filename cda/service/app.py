"""The ASGI application of ``cda serve``: the ToolBus, the SSE streams and the page — nothing else.

Four routes (a test enumerates them): ``/toolbus`` (WebSocket), ``/streams/actions/{action_id}``
(SSE; the topic ``actions/<id>`` that ``actions.start`` returns), ``/streams/metrics`` (SSE; each
finished run's spec §10 metrics and the rolling SLO status, :mod:`.metrics_stream`) and ``/``
(the static page).
There is no REST surface. On start-up the store's unfinished actions are marked interrupted
(a crash cut them off); a task sweeps finished streams older than the retention; on shutdown
every open stream ends (clients resume elsewhere) and running actions end interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route, WebSocketRoute

from cda.adapters.auth import OPEN, AuthConfig
from cda.adapters.http_guard import HostOriginGuard, RefusalLimiter
from cda.service.actions import ActionManager
from cda.service.calls import CALL_WALL_S, Calls
from cda.service.event_reads import sweep
from cda.service.metrics_stream import MetricsFeed, metrics_endpoint
from cda.service.page import PAGE
from cda.service.providers import FolderProvider, Provider
from cda.service.streams import Hub, stream_endpoint
from cda.service.toolbus import toolbus_endpoint

if TYPE_CHECKING:
    from cda.adapters.otel_export import OtelExport

__all__ = ["ServiceConfig", "build_app"]

DAY = 24 * 3600.0


@dataclass
class ServiceConfig:
    """Everything ``cda serve`` lets a person set; the defaults are the safe ones."""

    db: Path
    auth: AuthConfig = OPEN
    cors_origins: tuple[str, ...] = ()
    retention_s: float = DAY
    sweep_s: float = 3600.0
    keepalive_s: float = 15.0
    buffer: int = 512  # events a subscriber may lag behind before it is dropped
    workers: int = 2
    processes: int = 0  # runner processes (0: the actions run in the server's threads)
    egress_cap: str = "local"
    debug: bool = False
    providers: Path | None = None  # DIR/<ability>/<source>.txt: the local sub-action providers
    fsync: bool = False  # fsync every commit (see actions.relax_fsync)
    otel_endpoint: str | None = None  # an OTLP/HTTP collector to export the metrics topic to (off: None)
    partner_wall: float | None = 300.0  # seconds a partner's action may run (None: no cap)
    partner_slots: int | None = None  # slots one partner may hold (None: half the workers, at least one)
    call_wall: float | None = CALL_WALL_S  # seconds a ToolBus product call may run (None: no cap; cda.service.calls)
    host: str = "127.0.0.1"  # the address it binds: a Host the guard accepts
    allowed_hosts: tuple[str, ...] = ()  # further names clients reach it by (--allowed-host)
    allow_code: bool = False  # the internal role may run user code (functions) (--allow-code)
    guard_policies: Path | None = None  # guard.evaluate's policy store (--guard-policies)
    guard_ledger: Path | None = None  # guard.evaluate's guardian file (--guard-ledger)
    legacy_aliases: bool = False  # spec §13 for one window: wu_* beside action_*, work_unit_id accepted


@dataclass
class _State:
    config: ServiceConfig
    auth: AuthConfig
    debug: bool
    hub: Hub | None = None
    manager: ActionManager | None = None
    metrics: MetricsFeed | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    refusals: RefusalLimiter = field(default_factory=RefusalLimiter)
    env: Any = None  # the operations' facilities (cda.service.env), made on first use
    calls: Calls = field(default_factory=Calls)  # the ToolBus calls running in threads, each with its token


def build_app(config: ServiceConfig) -> Any:
    """The application behind its Host/Origin guard (:mod:`cda.adapters.http_guard`); its lifespan
    opens the store, recovers, and closes everything."""
    auth = config.auth.with_code() if config.allow_code else config.auth
    state = _State(config, auth, config.debug, calls=Calls(config.call_wall))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        export = _otel(config)
        hub = Hub(config.db, buffer=config.buffer)
        manager = await anyio.to_thread.run_sync(
            lambda: ActionManager(config.db, hub, workers=config.workers, processes=config.processes,
                                  egress_cap=config.egress_cap,
                                  providers=_providers(config.providers), fsync_each_commit=config.fsync,
                                  self_approval=config.auth.open, auth=auth,
                                  partner_wall=config.partner_wall, partner_slots=config.partner_slots,
                                  legacy_aliases=config.legacy_aliases))
        state.hub, state.manager = hub, manager
        await anyio.to_thread.run_sync(manager.recover)
        feed = state.metrics = MetricsFeed(config.db, observers=[] if export is None else [export.record])
        hub.on_finish.append(feed.poke)
        state.tasks = [asyncio.create_task(hub.watch_external()), asyncio.create_task(_sweeper(config)),
                       asyncio.create_task(feed.run())]
        app.state.service = state
        try:
            yield
        finally:
            hub.close()
            feed.close()
            for task in state.tasks:
                task.cancel()
            await anyio.to_thread.run_sync(manager.shutdown)
            if export is not None:
                await anyio.to_thread.run_sync(export.shutdown)  # the last numbers reach the collector

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE, headers={"Cache-Control": "no-cache"})

    routes = [
        WebSocketRoute("/toolbus", toolbus_endpoint(lambda: state)),
        Route("/streams/actions/{action_id}", stream_endpoint(lambda: state.hub, config.keepalive_s, config.auth,  # type: ignore[arg-type,return-value]
                                                              lambda: state.manager, config.legacy_aliases),
              methods=["GET", "HEAD", "OPTIONS"]),
        Route("/streams/metrics", metrics_endpoint(lambda: state.metrics, config.keepalive_s, config.auth),
              methods=["GET", "HEAD", "OPTIONS"]),
        Route("/", page, methods=["GET", "HEAD"]),
    ]
    middleware = []
    if config.cors_origins:
        middleware.append(Middleware(CORSMiddleware, allow_origins=list(config.cors_origins),  # type: ignore[arg-type]
                                     allow_methods=["GET", "HEAD", "OPTIONS"], allow_headers=["Last-Event-ID", "Authorization"],
                                     max_age=600))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.service = state
    return HostOriginGuard(app, bind=config.host, allowed_hosts=config.allowed_hosts, allowed_origins=config.cors_origins)


def _providers(folder: Path | None) -> dict[str, Provider]:
    if folder is None:
        return {}
    return {ability: FolderProvider(folder / ability) for ability in ("research", "sandbox", "default")}


def _otel(config: ServiceConfig) -> OtelExport | None:
    """The OpenTelemetry export of each finished run, when an endpoint is configured (lazy import)."""
    if config.otel_endpoint is None:
        return None
    from cda.adapters.otel_export import OtelExport

    return OtelExport.to_endpoint(config.otel_endpoint)


async def _sweeper(config: ServiceConfig) -> None:
    """Drop finished streams older than the retention, every ``sweep_s``."""
    while True:
        await asyncio.sleep(config.sweep_s)
        await anyio.to_thread.run_sync(sweep, config.db, config.retention_s)
