"""An MCP server that answers more than ``max_reply_bytes`` (docs/conductor.md, docs/guardian.md): the
reply is refused as it arrives, never held whole (peak memory measured with a real server sending
100 MB), the call answers an error that says so, and the session goes on. Through ``cda conduct``
(the conductor's MCP tools, over stdio and streamable HTTP) and ``cda guard proxy`` (the gateway,
with the official SDK's client)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is in the test extra (cda[mcp])")

BIG_SERVER = r'''"""An MCP server whose `big` tool answers n bytes of text and `small` a few."""
import sys
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("big")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def big(n: int) -> str:
    """n bytes of text."""
    return "x" * n


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def small(n: int) -> dict:
    """A short answer."""
    return {"n": n}


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:  # streamable HTTP on a free loopback port, printed first
        import socket

        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        print(sock.getsockname()[1], flush=True)
        uvicorn.Server(uvicorn.Config(server.streamable_http_app(json_response=True), log_level="warning")).run(
            sockets=[sock])
    else:
        server.run()
'''

# the peak is this process's own (VmHWM, of the memory it has since exec): getrusage's ru_maxrss
# keeps the high-water mark of the process it was forked from, a pytest worker of 800 MB in a
# full run of the suite
MEASURED = r'''import io, json, sys
from cda.cli.main import main
out, err = io.StringIO(), io.StringIO()
code = main(sys.argv[1:], out, err)
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "peak_kb": peak}))
'''

BIG = 100_000_000


def _registry(folder: Path, server: str, cap: int) -> None:
    (folder / "tools.toml").write_text(f'''
[[tool]]
name = "big"
mcp = {{ {server}, timeout_s = 600, max_reply_bytes = {cap} }}
reliability = "high"
cost = "low"
latency_ms = 1
''')


def _conduct_measured(folder: Path) -> dict:
    (folder / "o.json").write_text(json.dumps({"obligations": [
        {"type": "big", "inputs": {"n": BIG}}, {"type": "small", "inputs": {"n": 7}}]}))
    done = subprocess.run([sys.executable, "-c", MEASURED, "conduct", "--obligations", "o.json", "--db", "ir.sqlite",
                           "--registry", "tools.toml", "--json"], capture_output=True, text=True, cwd=folder,
                          timeout=900, check=False)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout)


def _check(ran: dict) -> None:
    trace = json.loads(ran["out"])
    runs = {run["tool"]: run for run in trace["tool_runs"]}
    assert runs["big.big"]["status"] == "error", runs
    assert "the server's reply is larger than 1000000 bytes (max_reply_bytes): refused, not read" in runs["big.big"]["detail"]
    assert runs["big.small"]["status"] == "ok" and runs["big.small"]["outputs"] == {"n": 7}  # the session went on
    # the conductor with the SDK and a session open is about 150 MB; holding the 100 MB reply (its
    # line, its text, its JSON) took more than 400 MB before (848 MB for 200 MB in the audit)
    assert ran["peak_kb"] < 300_000, f"peak {ran['peak_kb'] // 1024} MiB"


def test_a_stdio_servers_huge_reply_is_refused_unread_and_the_session_goes_on(tmp_path: Path) -> None:
    (tmp_path / "big_server.py").write_text(BIG_SERVER)
    _registry(tmp_path, f'command = [{json.dumps(sys.executable)}, "big_server.py"]', 1_000_000)
    _check(_conduct_measured(tmp_path))


def test_an_http_servers_huge_reply_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "big_server.py").write_text(BIG_SERVER)
    server = subprocess.Popen([sys.executable, "big_server.py", "http"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        _registry(tmp_path, f'url = "http://127.0.0.1:{port}/mcp"', 1_000_000)
        _check(_conduct_measured(tmp_path))
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


@pytest.mark.parametrize("value", ["-1", "10", "1e9", "nan", "2000000000"])
def test_the_cap_is_a_checked_option(tmp_path: Path, value: str) -> None:
    _registry(tmp_path, 'command = ["prog"]', 0)
    (tmp_path / "tools.toml").write_text((tmp_path / "tools.toml").read_text().replace("max_reply_bytes = 0",
                                                                                      f"max_reply_bytes = {value}"))
    done = subprocess.run([sys.executable, "-m", "cda", "conduct", "x", "--db", "ir.sqlite", "--registry", "tools.toml"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "max_reply_bytes must be a whole number from 1024 to 1000000000" in done.stderr or (
        "max_reply_bytes" in done.stderr and "TOML" in done.stderr), done.stderr
    done = subprocess.run([sys.executable, "-m", "cda", "guard", "proxy", "--upstream", "prog", "--agent", "a",
                           "--policies", "p.toml", "--ledger", "g.db", "--max-reply-bytes", value],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 2 and "--max-reply-bytes" in done.stderr and "Traceback" not in done.stderr


def test_a_json_reply_is_counted_whatever_the_case_of_its_type() -> None:
    """A server that spells its JSON type in capitals (the SDK reads the body whole all the same)
    is held to the cap: a real server on loopback, the transport's own client."""
    import asyncio

    from cda.conductor.mcp_transport import ReplyTooLarge, _counting_client

    body = b"[" + b"1," * 50_000 + b"1]"

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: Application/JSON\r\nConnection: close\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        for i in range(0, len(body), 4096):
            part = body[i:i + 4096]
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def run() -> str:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with _counting_client(10_000) as client:
                try:
                    response = await client.get(f"http://127.0.0.1:{port}/mcp")  # read whole, as the SDK's aread
                except ReplyTooLarge as exc:
                    return str(exc)
                return f"read {len(response.content)} bytes"
        finally:
            server.close()
            await server.wait_closed()

    assert asyncio.run(run()) == "the server's reply is larger than 10000 bytes (max_reply_bytes): refused, not read"
