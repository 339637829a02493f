"""Wave G's MCP reply cap (``max_reply_bytes``, docs/conductor.md) audited as an attacker: a server
that compresses its reply (``Content-Encoding: gzip``) got past the counter, which counted the
compressed bytes while the HTTP client inflated them (9.7 KB on the wire, 10 MB read under a
100 KB cap; a gzip bomb inflates a thousandfold). The transport now asks for no compression and
refuses a compressed reply unread; a reply exactly at the cap still passes, one byte over does
not. A real server on loopback, the transport's own client (as the SDK reads a JSON reply:
whole, and an SSE stream: as text)."""

from __future__ import annotations

import asyncio
import gzip

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from cda.conductor.mcp_transport import ReplyTooLarge, _counting_client, too_large  # noqa: E402

CAP = 100_000


def _ask(status_line_and_headers: bytes, body: bytes, *, sse: bool = False) -> tuple[str, bytes]:
    """What the capped client makes of one reply (``read N bytes`` or the refusal), and the request it sent."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(status_line_and_headers + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        writer.close()

    async def run() -> str:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with _counting_client(CAP) as client:
                try:
                    if sse:
                        async with client.stream("GET", f"http://127.0.0.1:{port}/mcp") as response:
                            text = "".join([chunk async for chunk in response.aiter_text()])
                        return f"read {len(text)} bytes"
                    response = await client.get(f"http://127.0.0.1:{port}/mcp")
                except ReplyTooLarge as exc:
                    return str(exc)
                return f"read {len(response.content)} bytes"
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(run()), b"".join(seen)


@pytest.mark.parametrize("content_type", [b"application/json", b"text/event-stream"])
def test_a_compressed_reply_is_refused_unread(content_type: bytes) -> None:
    inflated = b"[" + b"1," * 5_000_000 + b"1]"  # 10 MB, 100 times the cap
    said, request = _ask(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nContent-Encoding: gzip\r\n",
                         gzip.compress(inflated), sse=content_type == b"text/event-stream")
    assert b"accept-encoding: identity" in request.lower()  # an honest server is asked not to compress
    assert said.startswith(too_large(CAP)) and "Content-Encoding: gzip" in said, said  # was: read 10000003 bytes


@pytest.mark.parametrize(("size", "said"), [(CAP, f"read {CAP} bytes"), (CAP + 1, too_large(CAP))])
def test_a_reply_exactly_at_the_cap_passes_and_one_byte_over_does_not(size: int, said: str) -> None:
    body = b'"' + b"x" * (size - 2) + b'"'
    for declared in (True, False):  # the length said up front, or found while reading (chunked)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        if declared:
            assert _ask(head, body)[0] == said
        else:
            chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
            assert _ask_chunked(head, chunked) == said


def _ask_chunked(head: bytes, chunked: bytes) -> str:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(head + b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
        await writer.drain()
        writer.close()

    async def run() -> str:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with _counting_client(CAP) as client:
                try:
                    response = await client.get(f"http://127.0.0.1:{port}/mcp")
                except ReplyTooLarge as exc:
                    return str(exc)
                return f"read {len(response.content)} bytes"
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(run())
