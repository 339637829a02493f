"""``cda serve DB``: the service on uvicorn, until Ctrl-C or SIGTERM; exit 2 when it cannot start.

Loopback by default; a non-loopback ``--host`` needs ``--auth FILE`` (an open server would let
anyone on the network start actions). Every request passes the Host/Origin guard first
(:mod:`cda.adapters.http_guard`: ``--allowed-host`` and ``--cors-origin`` widen it). On SIGTERM (or
Ctrl-C) the running actions' solvers are interrupted at once and the open streams end (their clients
resume on the next server with ``Last-Event-ID``); the actions end ``interrupted`` with what they
found, and the process exits 0 within :data:`EXIT_WITHIN_S` seconds: uvicorn's graceful shutdown of
the connections (at most 5 s), then at most :data:`~cda.service.scheduling.SHUTDOWN_WAIT_S` for the
runs. A run still in code that reads no deadline after that is left to the next start (marked
interrupted), and the process ends without waiting for its thread (docs/service.md, "Stopping").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from cda.adapters.auth import OPEN, AuthConfig
from cda.adapters.http_guard import is_loopback
from cda.adapters.otel_config import check_otel_endpoint
from cda.errors import CDAError

__all__ = ["main_serve", "run_server"]

MIN_RETENTION_H = 24.0
MAX_RETENTION_H = 24.0 * 365
EXIT_WITHIN_S = 10.0
"""The promise about SIGTERM: the process is gone this many seconds after it (tests/test_cancel_service.py)."""


def run_server(app: Any, host: str, port: int, on_ready: Any = None) -> None:
    """Serve ``app`` with uvicorn; SIGTERM/SIGINT end the streams at once, then shut down."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            state = app.state.service
            state.calls.stop_all()  # the ToolBus calls' solvers too (cda.service.calls)
            if state.manager is not None:  # the runs' solvers stop now, not after the connections drain
                state.manager.interrupt_all()
            if state.hub is not None:
                state.hub.loop.call_soon_threadsafe(state.hub.close)
                if state.metrics is not None:  # the metrics topic's streams end at once too
                    state.hub.loop.call_soon_threadsafe(state.metrics.close)
            super().handle_exit(sig, frame)
            # a stop asked for is a clean exit (0), not a death by the signal uvicorn would re-raise
            getattr(self, "_captured_signals", []).clear()

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if on_ready is not None and self.started:
                on_ready(self)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", ws="websockets-sansio",
                            timeout_graceful_shutdown=5, backlog=4096, ws_max_size=1 << 20)
    Server(config).run()


def main_serve(db: Path, host: str, port: int, out: TextIO, err: TextIO, *, auth_file: Path | None = None,
               cors: list[str] | None = None, retention_h: float = 24.0, workers: int = 2, processes: int = 0,
               egress_cap: str = "local", debug: bool = False, providers: Path | None = None,
               fsync: bool = False, otel_endpoint: str | None = None, allowed_hosts: list[str] | None = None,
               allow_code: bool = False, guard_policies: Path | None = None, guard_ledger: Path | None = None,
               partner_wall: float | None = 300.0, partner_slots: int | None = None,
               legacy_aliases: bool = False, call_wall: float | None = 300.0) -> int:
    """The ``cda serve`` command."""
    if not host.strip():
        err.write("cda: error: --host is empty; give an address (127.0.0.1, or 0.0.0.0 for every interface)\n")
        return 2
    auth = OPEN
    try:
        from cda.lazy import require_extra

        require_extra("service", "cda serve", "starlette", "uvicorn", "websockets", "anyio")
        if auth_file is not None:
            auth = AuthConfig.load(auth_file)
        if not is_loopback(host) and auth.open:
            raise CDAError(f"--host {host}: without --auth FILE the server binds loopback only "
                           "(every client would be an anonymous partner)")
        if not MIN_RETENTION_H <= retention_h <= MAX_RETENTION_H:
            raise CDAError(f"--retention-hours must be between {MIN_RETENTION_H:g} and {MAX_RETENTION_H:g}, "
                           f"got {retention_h:g}")
        if not 1 <= workers <= 64:
            raise CDAError(f"--workers must be between 1 and 64, got {workers}")
        if not 0 <= processes <= 64:
            raise CDAError(f"--processes must be between 0 and 64, got {processes}")
        if partner_slots is not None and not 1 <= partner_slots <= workers:
            raise CDAError(f"--partner-slots must be between 1 and --workers ({workers}), got {partner_slots}")
        if not db.parent.is_dir():
            raise CDAError(f"{db}: its folder does not exist")
        from cda.service.actions import check_signable

        check_signable(db)  # nothing created yet: a lost log, a foreign state file, a rewritten log are exit 2
        if providers is not None and not providers.is_dir():
            raise CDAError(f"--providers {providers}: not a folder")
        if otel_endpoint is not None:
            check_otel_endpoint(otel_endpoint)
        if (guard_policies is None) != (guard_ledger is None):
            raise CDAError("--guard-policies and --guard-ledger go together (guard.evaluate needs both)")
        for name, value in (("--guard-policies", guard_policies), ("--guard-ledger", guard_ledger)):
            if value is not None and not value.is_file():
                raise CDAError(f"{name} {value}: not a file")
    except CDAError as exc:
        err.write(f"cda: error: {exc}\n")
        return 2
    from cda.service.app import ServiceConfig, build_app

    app = build_app(ServiceConfig(db=db, auth=auth, cors_origins=tuple(cors or ()), retention_s=retention_h * 3600,
                                  workers=workers, processes=processes, egress_cap=egress_cap, debug=debug,
                                  providers=providers, fsync=fsync, otel_endpoint=otel_endpoint, host=host,
                                  allowed_hosts=tuple(allowed_hosts or ()), allow_code=allow_code,
                                  guard_policies=guard_policies, guard_ledger=guard_ledger,
                                  partner_wall=partner_wall, partner_slots=partner_slots,
                                  legacy_aliases=legacy_aliases, call_wall=call_wall))

    def ready(server: Any) -> None:
        sock = server.servers[0].sockets[0].getsockname()
        out.write(f"serving {db} at http://{sock[0]}:{sock[1]}/ (ToolBus ws://{sock[0]}:{sock[1]}/toolbus)\n")
        out.flush()

    try:
        run_server(app, host, port, ready)
    except OSError as exc:
        err.write(f"cda: error: cannot serve on {host}:{port}: {exc}\n")
        return 2
    except KeyboardInterrupt:
        pass
    manager = app.state.service.manager
    if manager is not None and manager.stuck:  # their threads would hold the exit: leave them behind
        err.write(f"cda serve: {manager.stuck} action(s) did not stop in time; the next start marks them "
                  "interrupted\n")
        err.flush()
        out.flush()
        os._exit(0)
    return 0
