"""A hand-written stdio "MCP server" that breaks the protocol on purpose, for the failure tests.

It answers the handshake-era handshake correctly (and refuses `server/discover`, so a client falls back to it); then
`tools/call` of `rpc_error` answers a JSON-RPC error, `malformed` a result that is not a CallToolResult, `pid`
its process id, and `grow` adds a tool and sends `notifications/tools/list_changed`.
"""

from __future__ import annotations

import json
import os
import sys

# Started with RAW_REQUIRE set, it refuses to run unless RAW_TOKEN carries that value (the CLI test's sealed secret).
if os.environ.get("RAW_REQUIRE") and os.environ.get("RAW_TOKEN") != os.environ["RAW_REQUIRE"]:
    sys.exit(3)

TOOLS = [
    {"name": name, "description": f"Answers {name}.", "inputSchema": {"type": "object"}}
    for name in ("rpc_error", "malformed", "pid", "grow")
]


def answer(request: dict[str, object]) -> dict[str, object] | None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        result: object = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "raw", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and request.get("params", {}).get("name") == "malformed":  # type: ignore[union-attr]
        result = {"content": "this should be a list of blocks"}
    elif method == "tools/call" and request.get("params", {}).get("name") == "pid":  # type: ignore[union-attr]
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
    elif method == "tools/call" and request.get("params", {}).get("name") == "grow":  # type: ignore[union-attr]
        TOOLS.append({"name": "grown", "description": "Grown on request.", "inputSchema": {"type": "object"}})
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n")
        result = {"content": [{"type": "text", "text": "grew"}]}
    elif method == "tools/call":
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32603, "message": "the raw server broke"}}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


for line in sys.stdin:
    if line.strip():
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
