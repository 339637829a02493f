"""An MCP server with side effects to put the guardian's gateway in front of (docs/guardian.md,
"The gateway"), written with the MCP SDK's MCPServer. Each call of a tool appends one line to the
file named by its first argument (default ``records-calls.jsonl``), so what reached it is counted
by the server itself (tests/test_guard_proxy.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

CALLS = Path(sys.argv[1] if len(sys.argv) > 1 else "records-calls.jsonl")
server = MCPServer(name="records", version="1.4")


def _count(tool: str, **arguments: object) -> None:
    with CALLS.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, **arguments}, sort_keys=True) + "\n")


@server.tool()
def read_record(table: str, key: int) -> str:
    """Read one record."""
    _count("read_record", table=table, key=key)
    return f"{table}/{key}: ok"


@server.tool()
def delete_record(table: str, key: int) -> str:
    """Delete one record."""
    _count("delete_record", table=table, key=key)
    return f"{table}/{key}: deleted"


@server.tool()
def launch_campaign(name: str) -> str:
    """Launch an ad campaign."""
    _count("launch_campaign", name=name)
    return f"campaign {name} launched"


if __name__ == "__main__":
    server.run("stdio")
