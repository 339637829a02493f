"""MCP client transports that never hold more of a server's reply than a cap (docs/conductor.md,
"Your own tools"; docs/guardian.md, "The gateway").

The SDK's transports read a message whole before they look at it: a stdio server that writes one
200 MB line made the conductor hold 848 MB and then time out (audit3). These read as the bytes
come and stop holding a message once it passes ``max_bytes``:

* :func:`capped_stdio` starts the server (as the SDK's ``stdio_client`` does: its command, the
  SDK's default environment plus ``env``, in a process group of its own so that it is stopped
  with what it started) and splits its output into lines itself. A line longer than the cap is
  dropped as it arrives and its request is answered with a JSON-RPC error that says so (the id is
  read from the line's first bytes; a reply that hides it fails every call still waiting). The
  session goes on: the next line is read as usual.
* :func:`capped_http` is the SDK's streamable-HTTP transport with an HTTP client whose JSON
  bodies are read through a counter that stops at the cap (the SDK answers the call with the
  error), and with the SDK's own per-event limit for SSE set to the cap. It asks for no
  compression and refuses a compressed reply unread (the counter sees the bytes on the wire, the
  client inflates them after it: a gzip bomb would pass any cap).

The gateway (``cda guard proxy``) uses them too; both are plain async context managers yielding
the two streams an ``mcp.Client`` takes as a transport.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["DEFAULT_MAX_REPLY", "ReplyTooLarge", "capped_http", "capped_stdio", "too_large"]

DEFAULT_MAX_REPLY = 10_000_000
"""Bytes of one reply an MCP server may send (the cap of a ``command`` tool's output, too)."""

_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')

_CHUNK = 1 << 16


def too_large(max_bytes: int) -> str:
    """The words of a refused reply."""
    return f"the server's reply is larger than {max_bytes} bytes (max_reply_bytes): refused, not read"


class _Outstanding:
    """The ids of the requests sent and not yet answered."""

    def __init__(self) -> None:
        self.ids: dict[str, Any] = {}

    @staticmethod
    def key(value: Any) -> str:
        import json

        return json.dumps(value)

    def add(self, value: Any) -> None:
        self.ids[self.key(value)] = value

    def discard(self, value: Any) -> None:
        self.ids.pop(self.key(value), None)

    def for_head(self, head: bytes) -> list[Any]:
        """The request a reply beginning with ``head`` answers, or every one waiting."""
        import json

        found = _ID.search(head)
        if found is not None:
            with contextlib.suppress(ValueError):
                value = json.loads(found[1])
                if self.key(value) in self.ids:
                    return [self.ids[self.key(value)]]
        return list(self.ids.values())


@asynccontextmanager
async def capped_stdio(command: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
                       max_bytes: int = DEFAULT_MAX_REPLY) -> AsyncIterator[tuple[Any, Any]]:
    """The server ``command`` over stdio, no line of its output held past ``max_bytes``."""
    import anyio
    from mcp import types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(command, env=get_default_environment() | (env or {}), cwd=cwd,
                                       stderr=None, start_new_session=True)
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)
    waiting = _Outstanding()

    async def refuse(head: bytes) -> None:
        for request_id in waiting.for_head(head):
            waiting.discard(request_id)
            error = types.ErrorData(code=types.INTERNAL_ERROR, message=too_large(max_bytes))
            await read_writer.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    async def deliver(line: bytes) -> None:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            await read_writer.send(exc)
            return
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            waiting.discard(message.id)
        await read_writer.send(SessionMessage(message))

    async def reader() -> None:
        assert process.stdout is not None
        buffer, dropping = bytearray(), False
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with read_writer:
                while True:
                    chunk = await process.stdout.receive(_CHUNK)
                    start = 0
                    while (end := chunk.find(b"\n", start)) >= 0:
                        if not dropping:
                            buffer.extend(chunk[start:end])
                            if len(buffer) > max_bytes:
                                await refuse(bytes(buffer[:4096]))
                            elif buffer.strip():
                                await deliver(bytes(buffer))
                        buffer.clear()
                        dropping, start = False, end + 1
                    if not dropping:
                        buffer.extend(chunk[start:])
                        if len(buffer) > max_bytes:  # the rest of this line is read and dropped as it comes
                            await refuse(bytes(buffer[:4096]))
                            buffer.clear()
                            dropping = True

    async def writer() -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with write_reader:
                async for session_message in write_reader:
                    message = session_message.message
                    if isinstance(message, types.JSONRPCRequest):
                        waiting.add(message.id)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((data + "\n").encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                with contextlib.suppress(Exception):
                    await process.stdin.aclose()  # type: ignore[union-attr]
                with anyio.move_on_after(2):
                    await process.wait()
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
            tg.cancel_scope.cancel()


class ReplyTooLarge(Exception):
    """Raised by the counting body reader; the SDK answers the call with it as an error."""


def _counting_client(max_bytes: int) -> Any:
    import httpx2

    class TooLarge(httpx2.StreamError, ReplyTooLarge):
        pass

    class Counted(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, declared: int, refused: str = "") -> None:
            self.inner, self.declared, self.refused = inner, declared, refused

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if self.refused:
                raise TooLarge(self.refused)
            if self.declared > max_bytes:  # said before a byte is read: none is
                raise TooLarge(too_large(max_bytes))
            seen = 0
            async for chunk in self.inner:
                seen += len(chunk)
                if seen > max_bytes:
                    raise TooLarge(too_large(max_bytes))
                yield chunk

        async def aclose(self) -> None:
            await self.inner.aclose()

    class Capped(httpx2.AsyncBaseTransport):
        """JSON bodies through the counter (the SDK reads them whole with ``aread``); an SSE
        stream is left to the SDK's own per-event limit, set to the same cap."""

        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            # the counter sees the bytes as they come, the client inflates them after it: a
            # compressed reply (9.7 KB of gzip read as 10 MB) is refused whatever its type, and the
            # client asks for none (Accept-Encoding: identity), so an honest server sends none
            encoding = response.headers.get("content-encoding", "").strip()
            if encoding.lower() not in ("", "identity"):
                response.stream = Counted(response.stream, 0, f"{too_large(max_bytes)} (Content-Encoding: "
                                                              f"{encoding[:40]}: compressed bytes cannot be counted)")
                return response
            # the SDK reads the type in any case ("Application/JSON" is JSON to it): so does the counter
            if response.headers.get("content-type", "").lower().startswith("application/json"):
                length = response.headers.get("content-length", "")
                response.stream = Counted(response.stream, int(length) if length.isdigit() else 0)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    return httpx2.AsyncClient(transport=Capped(), timeout=httpx2.Timeout(30.0, read=300.0),  # the SDK's timeouts
                              headers={"Accept-Encoding": "identity"})


@asynccontextmanager
async def capped_http(url: str, *, max_bytes: int = DEFAULT_MAX_REPLY) -> AsyncIterator[tuple[Any, Any]]:
    """The server at ``url`` over streamable HTTP, no reply held past ``max_bytes``."""
    from mcp.client.streamable_http import streamable_http_client

    async with _counting_client(max_bytes) as client, streamable_http_client(
            url, http_client=client, max_sse_event_size=max_bytes) as streams:
        yield streams
