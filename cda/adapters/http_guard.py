"""What every CDA HTTP listener does before its app sees a request (``cda serve``, ``cda mcp --http``).

* **Host** must name this server: a loopback name (``localhost``, ``127.0.0.1``, ``::1``), the
  address the connection arrived at, the address it binds, or a name given with
  ``--allowed-host``. Anything else is **421** — a DNS-rebinding page reaches the server under
  its own name, which is none of these.
* **Origin**, when a browser sends one, must be the server's own origin or one given with
  ``--cors-origin``; anything else (another site, ``null``, another port of this machine) is
  **403**. The server's own origin is the request's scheme, one of those hosts, and a port: the
  port the server actually bound (read from the connection, so ``--port 0`` works too) or the
  port of the request's own ``Host`` when the Origin names that same host (a forwarded port,
  ``ssh -L 8080:localhost:8765``: the browser sends ``Host: localhost:8080`` and
  ``Origin: http://localhost:8080``). Browsers treat every port as another origin, so a page
  served by any other local web server is refused. A WebSocket handshake always carries its
  page's Origin, so a page elsewhere cannot open the ToolBus.
  The **Host** check needs no port: a browser sends the ``Host`` of the URL it connected to, and
  that connection reached this server, so the name is what a rebinding page can forge, not the
  port.
* A ``?token=`` in the query (a browser's ``EventSource`` and WebSocket cannot set headers) is
  taken out of the request before anything logs it: the endpoints read it from
  ``scope["cda.token"]``; access logs and error messages see the path without it.

:class:`RefusalLimiter` keeps refused connects (no token, an unknown token) from costing a receipt
each: a few per client address are receipted, the rest are answered 429 and counted into the next
receipt. Pure ASGI, no framework: the same guard wraps Starlette and the MCP SDK's app.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from cda.errors import OptionError

__all__ = ["HostOriginGuard", "LOOPBACK_NAMES", "RefusalLimiter", "host_of", "cors_origin", "is_loopback", "origin_key",
           "presented"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_of(value: str) -> str:
    """The host part of a ``Host`` header or an origin's netloc, lower case, no port, no brackets.

    >>> host_of("LocalHost:8765"), host_of("[::1]:80"), host_of("10.0.0.2")
    ('localhost', '::1', '10.0.0.2')
    """
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def presented(scope: Scope, headers: Any) -> str | None:
    """The token a request presents: ``Authorization: Bearer``, else the ``?token=`` the guard took
    out of its query (``scope["cda.token"]``)."""
    authorization = headers.get("authorization", "") if headers is not None else ""
    token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else None
    return token or scope.get("cda.token")


class HostOriginGuard:
    """The ASGI middleware of the module docstring, around ``app``."""

    def __init__(self, app: Any, *, bind: str, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.bind = host_of(bind) if bind not in ("0.0.0.0", "::", "") else ""
        self.hosts = {host_of(h) for h in allowed_hosts}
        self.origins = {cors_origin(o) for o in allowed_origins}

    def __getattr__(self, name: str) -> Any:  # the wrapped app's own attributes (state, routes)
        return getattr(self.app, name)

    def _host_ok(self, host: str, scope: Scope) -> bool:
        if not host:
            return False
        if is_loopback(host) or host in self.hosts or (self.bind and host == self.bind):
            return True
        server = scope.get("server")
        return server is not None and host == str(server[0]).lower()  # the address the client connected to, by number

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        _take_token(scope)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self._host_ok(host_of(headers.get("host", "")), scope):
            await _refuse(scope, receive, send, 421, "misdirected request: this server does not answer to that Host\n")
            return
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin, scope, headers.get("host", "")):
            await _refuse(scope, receive, send, 403, "forbidden: requests from that Origin are not accepted\n")
            return
        await self.app(scope, receive, send)

    def _origin_ok(self, origin: str, scope: Scope, host_header: str) -> bool:
        key = origin_key(origin)
        if key is None:
            return False  # "null" (a file, a sandboxed frame) and anything stranger
        if key in self.origins:
            return True
        scheme, host, port = key
        if scheme != _HTTP_SCHEME.get(str(scope.get("scheme", "http")), "") or not self._host_ok(host, scope):
            return False
        server = scope.get("server")
        if server is not None and port == server[1]:
            return True  # the port this server bound, whatever name the page used for it
        own = origin_key(f"{scheme}://{host_header}")
        return own == key  # a forwarded port: the page's origin is the Host the browser sent here


_HTTP_SCHEME = {"http": "http", "ws": "http", "https": "https", "wss": "https"}
_DEFAULT_PORT = {"http": 80, "https": 443}


def origin_key(origin: str) -> tuple[str, str, int] | None:
    """An origin as (scheme, host, port) with the scheme's default port filled in, or ``None`` when
    it is not an http(s) origin (``null``, a bad port, a path).

    >>> origin_key("HTTP://LocalHost/"), origin_key("https://[::1]:8443"), origin_key("null")
    (('http', 'localhost', 80), ('https', '::1', 8443), None)
    """
    parts = urlsplit(origin.strip().lower())
    if parts.scheme not in _DEFAULT_PORT or not parts.hostname or parts.path not in ("", "/") \
            or parts.query or parts.fragment or parts.username is not None:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.scheme, parts.hostname, _DEFAULT_PORT[parts.scheme] if port is None else port


def cors_origin(value: str) -> tuple[str, str, int]:
    """An origin given with ``--cors-origin``, as :func:`origin_key` reads it; anything else (a bare
    host, a path, ``null``) is refused rather than silently matching nothing.

    >>> cors_origin("https://console.example")
    ('https', 'console.example', 443)
    >>> cors_origin("localhost:8080")
    Traceback (most recent call last):
    ...
    cda.errors.OptionError: --cors-origin must be an origin, scheme://host[:port] (http or https, no path), not 'localhost:8080'
    """
    key = origin_key(value)
    if key is None:
        raise OptionError(f"--cors-origin must be an origin, scheme://host[:port] (http or https, no path), "
                          f"not {value!r}")
    return key


def _take_token(scope: Scope) -> None:
    raw = scope.get("query_string", b"")
    if b"token=" not in raw:
        return
    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k != "token"]
    tokens = [v for k, v in pairs if k == "token"]
    if tokens:
        scope["cda.token"] = tokens[0]
    scope["query_string"] = urlencode(kept).encode("latin-1")  # the same dict every later log line reads


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, text: str) -> None:
    body = text.encode("utf-8")
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "websocket.close", "code": 1008})  # the server answers the handshake 403


@dataclass
class _Bucket:
    tokens: float
    at: float
    suppressed: int = 0


@dataclass
class RefusalLimiter:
    """Refused connects per client address: ``burst`` receipted at once, then ``rate`` a second;
    beyond that a connect is answered 429 without a receipt and counted (the next receipt of that
    address says how many were not receipted). Addresses seen are capped (``max_clients``)."""

    burst: int = 10
    rate: float = 1.0
    max_clients: int = 10_000
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, client: str) -> int | None:
        """``None`` when this refusal is over the limit (answer 429, write nothing); else how many
        refusals of ``client`` went unreceipted since its last receipt (to write into this one)."""
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(client)
            if bucket is None:
                if len(self._buckets) >= self.max_clients:
                    self._buckets.clear()  # a flood from many addresses: start afresh, bounded memory
                bucket = self._buckets[client] = _Bucket(float(self.burst), now)
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
            if bucket.tokens < 1.0:
                bucket.suppressed += 1
                return None
            bucket.tokens -= 1.0
            skipped, bucket.suppressed = bucket.suppressed, 0
            return skipped
