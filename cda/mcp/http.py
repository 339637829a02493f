"""``cda mcp --http``: the MCP server's streamable HTTP app behind CDA's own gatekeepers.

Outermost, the Host/Origin guard of every CDA listener (:mod:`cda.adapters.http_guard`: loopback
names, the bound address, ``--allowed-host``, ``--cors-origin``; anything else 421/403 before the
SDK sees it — the SDK's own check is off because it switches itself off for any address but
literal loopback). Then, with ``--auth`` (the token file of ``cda serve``, required off loopback),
a bearer token on every request: its principal goes to the tools (``scope["cda.principal"]``); a
missing or unknown token is 401, receipted a few times per client address and then answered 429
without a receipt (:class:`~cda.adapters.http_guard.RefusalLimiter`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

from cda.adapters.auth import AuthConfig
from cda.adapters.http_guard import HostOriginGuard, RefusalLimiter, presented

__all__ = ["BearerGate", "guarded", "http_app", "serve_app", "serve_http"]


class BearerGate:
    """Every request carries a known token (``Authorization: Bearer``, or ``?token=``)."""

    def __init__(self, app: Any, auth: AuthConfig, receipt: Any, limiter: RefusalLimiter | None = None) -> None:
        self.app, self.auth, self.receipt = app, auth, receipt
        self.limiter = limiter if limiter is not None else RefusalLimiter()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        token = presented(scope, headers)
        who = self.auth.principal(token)
        if who is None:
            client = str(scope.get("client", ("", 0))[0])
            skipped = self.limiter.admit(client)
            if skipped is None:
                await _answer(send, 429, b"too many refused requests\n", [(b"retry-after", b"1")])
                return
            self.receipt(client, bool(token), skipped)
            await _answer(send, 401, b"a known token is required (Authorization: Bearer)\n",
                          [(b"www-authenticate", b"Bearer")])
            return
        scope["cda.principal"] = who
        await self.app(scope, receive, send)


async def _answer(send: Any, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})


def guarded(app: Any, args: Any, auth: AuthConfig | None, log: Any) -> Any:
    """``app`` behind CDA's gatekeepers: with ``auth`` the bearer tokens (refusals receipted in
    ``log``, which has ``append`` and ``count``), outermost the Host/Origin guard."""
    if auth is not None:
        def receipt(client: str, token_given: bool, skipped: int) -> None:
            from cda.contracts.receipt import Receipt, canonical_json, sha256_hex

            log.append(Receipt(action_id="mcp", seq=log.count("mcp"), kind="action", name="auth.refused",
                               inputs_hash=sha256_hex(canonical_json({"client": client, "token_given": token_given})),
                               result={"status_code": 401, "not_receipted_before": skipped}, status="denied"))

        app = BearerGate(app, auth, receipt)
    return HostOriginGuard(app, bind=args.host, allowed_hosts=args.allowed_host, allowed_origins=args.cors_origin)


def http_app(server: Any, args: Any, auth: AuthConfig | None) -> Any:
    """The guarded ASGI app of ``server`` (as ``cda mcp --http`` serves it)."""
    from mcp.server.transport_security import TransportSecuritySettings

    app: Any = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host=args.host)
    return guarded(app, args, auth, server.cda_door)


def serve_http(server: Any, args: Any, auth: AuthConfig | None, err: TextIO) -> int:
    """Serve until interrupted; exit 2 when the address cannot be bound."""
    def stopping() -> None:
        server.cda_door.stopping = True

    return serve_app(http_app(server, args, auth), args, err, on_stop=stopping)


def serve_app(app: Any, args: Any, err: TextIO, on_stop: Callable[[], None] | None = None) -> int:
    """Serve the guarded ``app`` on ``args.host``/``args.port`` until interrupted (the line on
    ``err`` names the address; exit 2 when it cannot be bound). ``on_stop`` is called when the
    server begins to stop, before the calls in flight are cut."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                host, port = self.servers[0].sockets[0].getsockname()[:2]
                err.write(f"cda: MCP over streamable HTTP at http://{host}:{port}/mcp\n")
                err.flush()

        async def shutdown(self, sockets: Any = None) -> None:
            if on_stop is not None:
                on_stop()
            await super().shutdown(sockets)

    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    try:
        Server(config).run()
    except OSError as exc:
        err.write(f"cda: error: cannot serve on {args.host}:{args.port}: {exc}\n")
        return 2
    except KeyboardInterrupt:
        pass
    return 0
