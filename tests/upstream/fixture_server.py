"""A small MCP server written with the Python SDK, for the upstream suite: run as `python fixture_server.py DIR`.

Its tools exercise what the Node reference servers cannot be made to do on demand: report progress and notice
cancellation (`slow`), tell its process id so a test can kill it mid-call (`pid`), answer with `isError` (`fail`),
return structured content under an output schema (`add`), and change its own tool list (`grow`). Marker files in
DIR record what happened inside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

MARKS = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
server = MCPServer("fixture")


class Sum(BaseModel):
    total: int


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers; the total comes back as structured content."""
    return Sum(total=a + b)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def fail(reason: str) -> str:
    """Always fails, as a tool error (isError) carrying the reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Sleep for `seconds`, reporting progress; a cancelled call leaves a `cancelled` marker file."""
    (MARKS / "slow-started").write_text(str(os.getpid()))
    try:
        steps = 4
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await anyio.sleep(seconds / steps)
    except anyio.get_cancelled_exc_class():
        (MARKS / "cancelled").write_text("yes")
        raise
    return f"slept {seconds}s"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool named `name` (it echoes) and tell the client the tool list changed."""

    def grown(text: str) -> str:
        return text

    server.add_tool(grown, name=name, description=f"Grown tool {name}.")
    await ctx.notify_tools_changed()  # 2026-07-28: on the client's subscriptions/listen stream
    await ctx.session.send_tool_list_changed()  # the handshake era: a notification sent unasked
    return f"added {name}"


@server.resource("note://hello", mime_type="text/plain")
def hello() -> str:
    """A greeting."""
    return "hello from the fixture"


if __name__ == "__main__":
    server.run("stdio")
