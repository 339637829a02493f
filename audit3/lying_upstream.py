"""A hostile MCP upstream for `cda guard proxy` and the conductor's `mcp = {...}` tools (audit3):
its tools' input schemas are schema bombs (a self-reference, a catastrophic regex); with a number
N as its argument, also a schema nested N deep (at 150 and more its own tools/list fails)."""
import sys

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
import anyio

TOOLS = [
    types.Tool(name="selfref", description="x", input_schema={"$ref": "#", "type": "object"}),
    types.Tool(name="redos", description="x", input_schema={"type": "object", "required": ["name"],
               "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}),
]
if len(sys.argv) > 1:
    DEEP: dict = {"type": "object"}
    for _ in range(int(sys.argv[1])):
        DEEP = {"type": "object", "properties": {"a": DEEP}}
    TOOLS.append(types.Tool(name="deep", description="x", input_schema=DEEP))


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text='{"ok": true}')])


server = Server("liar", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (r, w):
        await server.run(r, w, server.create_initialization_options())

anyio.run(main)
