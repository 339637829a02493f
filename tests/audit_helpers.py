"""Helpers shared by the tests that attack a door from outside: a one-tool conductor registry, a
receipt log edited under its triggers, and one HTTP reply read by the MCP transport's capped client."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

__all__ = ["TOOL", "capped_read", "edit_under_triggers", "one_tool_registry"]

TOOL = '''
[[tool]]
name = "{name}"
{body}
satisfies = ["{name}"]
inputs = ["x"]
timeout_s = {timeout}
reliability = "high"
cost = "low"
latency_ms = 1
'''


def one_tool_registry(folder: Path, body: str, timeout: int = 60, name: str = "t") -> Path:
    """``folder/tools.toml``: one tool ``name`` (input ``x``, satisfying ``name``) made by ``body``
    (its impl, command or mcp)."""
    (folder / "tools.toml").write_text(TOOL.format(name=name, body=body, timeout=timeout))
    return folder / "tools.toml"


def edit_under_triggers(db: Path, attack: Callable[[sqlite3.Connection], object], *, restore: bool = True) -> None:
    """Drop every trigger of the log at ``db``, ``attack`` it, put the triggers back (unless
    ``restore`` is False), all in one transaction: what someone who can write the file can do."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
        for name, _ in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        attack(conn)
        if restore:
            for _, sql in triggers:
                conn.execute(sql)
        conn.execute("COMMIT")
    finally:
        conn.close()


def capped_read(reply: bytes, cap: int, *, sse: bool = False) -> tuple[str, bytes]:
    """What :func:`cda.conductor.mcp_transport._counting_client` with ``cap`` makes of ``reply``
    (the raw bytes a loopback server answers with, headers included), read as the SDK reads it
    (a JSON body whole, an SSE stream as text): ``read N bytes`` or the refusal's words; and the
    request the client sent."""
    from cda.conductor.mcp_transport import ReplyTooLarge, _counting_client

    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(reply)
        await writer.drain()
        writer.close()

    async def run() -> str:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
        try:
            async with _counting_client(cap) as client:
                try:
                    if sse:
                        async with client.stream("GET", url) as response:
                            return f"read {len(''.join([chunk async for chunk in response.aiter_text()]))} bytes"
                    return f"read {len((await client.get(url)).content)} bytes"
                except ReplyTooLarge as exc:
                    return str(exc)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(run()), b"".join(seen)
