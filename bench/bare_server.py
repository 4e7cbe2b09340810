"""The baseline for the benchmarks: a bare MCP SDK lowlevel `Server` with one `echo` tool, served over stdio.

It does the least a real server can do (no storage, no validation beyond the SDK's own, no logging), so the
difference between it and `mcp-harness serve` is the harness's own cost per call and per start-up. Run it as a
script: `python bench/bare_server.py`; `latency.py` and `startup.py` spawn it that way.

With `--harness-transport` it serves over mcp-harness's own stdio transport instead of the SDK's, so `latency.py`
can also show what the harness costs with the transport difference taken out.
"""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

ECHO = types.Tool(
    name="echo",
    description="Return the `text` argument unchanged.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


async def on_list_tools(
    ctx: ServerRequestContext[dict[str, object]], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ECHO])


async def on_call_tool(
    ctx: ServerRequestContext[dict[str, object]], params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name != "echo":
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool {params.name!r}. Tools: echo.")
    text = (params.arguments or {}).get("text", "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(text))])


def build_server() -> Server[dict[str, object]]:
    return Server("bare-echo", version="0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def main() -> None:
    server = build_server()
    if "--harness-transport" in sys.argv[1:]:
        from mcp_harness.server import serve_stdio

        await serve_stdio(server)
        return
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
