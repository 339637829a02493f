"""Wave G's MCP reply cap (``max_reply_bytes``, docs/conductor.md) audited as an attacker: a server
that compresses its reply (``Content-Encoding: gzip``) got past the counter, which counted the
compressed bytes while the HTTP client inflated them (9.7 KB on the wire, 10 MB read under a
100 KB cap; a gzip bomb inflates a thousandfold). The transport now asks for no compression and
refuses a compressed reply unread; a reply exactly at the cap still passes, one byte over does
not. A real server on loopback, the transport's own client (as the SDK reads a JSON reply:
whole, and an SSE stream: as text)."""

from __future__ import annotations

import gzip

import pytest

from tests.audit_helpers import capped_read

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

from cda.conductor.mcp_transport import too_large  # noqa: E402

CAP = 100_000


@pytest.mark.parametrize("content_type", [b"application/json", b"text/event-stream"])
def test_a_compressed_reply_is_refused_unread(content_type: bytes) -> None:
    body = gzip.compress(b"[" + b"1," * 5_000_000 + b"1]")  # 10 MB inflated, 100 times the cap
    said, request = capped_read(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nContent-Encoding: gzip\r\n"
                                b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body, CAP,
                                sse=content_type == b"text/event-stream")
    assert b"accept-encoding: identity" in request.lower()  # an honest server is asked not to compress
    assert said.startswith(too_large(CAP)) and "Content-Encoding: gzip" in said, said  # was: read 10000003 bytes


@pytest.mark.parametrize(("size", "said"), [(100_000, "read 100000 bytes"), (100_001, too_large(CAP))])
def test_a_reply_exactly_at_the_cap_passes_and_one_byte_over_does_not(size: int, said: str) -> None:
    body = b'"' + b"x" * (size - 2) + b'"'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    declared = head + b"Content-Length: %d\r\n\r\n" % len(body) + body  # the length said up front
    chunked = head + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)  # found reading
    assert capped_read(declared, CAP)[0] == said
    assert capped_read(chunked, CAP)[0] == said
