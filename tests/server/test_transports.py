"""Real transports: one stdio subprocess and one Streamable HTTP server on loopback, in both protocol eras."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import cbor2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_harness.config import HttpSettings, TokenSettings, load_settings, token_hash
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from tests.conftest import call, owner_and_other, serving

pytestmark = pytest.mark.anyio


async def test_stdio_subprocess_serves_verbs_and_stdout_is_only_json_rpc(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_HARNESS_DATA_DIR": str(tmp_path)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_harness", "serve"], env=env)
    with anyio.fail_after(30):
        async with Client(params, mode="legacy") as c:
            assert [t.name for t in (await c.list_tools()).tools] == ["read", "write", "call", "delegate", "plan"]
            await call(c, "write", {"address": "~/memory/from-stdio.txt", "content": "over stdio"})
            assert (await call(c, "read", {"address": "~/memory/from-stdio.txt"}))["content"] == "over stdio"
    # The same server, driven by hand, so every byte it writes to stdout can be checked.
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "read", "arguments": {"address": "~/self"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "read", "arguments": {"address": "../x"}},
        },
    ]
    replies: list[dict[str, object]] = []
    with anyio.fail_after(30):
        async with await anyio.open_process(
            [sys.executable, "-m", "mcp_harness", "serve"], env=env, stderr=subprocess.DEVNULL
        ) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            await proc.stdin.send("".join(json.dumps(m) + "\n" for m in messages).encode())
            buffer = b""
            async for chunk in proc.stdout:
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                replies += [json.loads(line) for line in done if line.strip()]  # each line must parse as JSON
                if {r.get("id") for r in replies} >= {1, 2, 3}:
                    break
            await proc.stdin.aclose()
            await proc.wait()
    assert all(r["jsonrpc"] == "2.0" for r in replies)
    by_id: dict[object, Any] = {r["id"]: r for r in replies if "id" in r}
    assert set(by_id) == {1, 2, 3}
    assert by_id[2]["result"]["isError"] is False and by_id[3]["result"]["isError"] is True
    assert buffer.strip() == b""
    # Two processes, two sessions, each with its own log.
    h = Harness(load_settings(data_dir=tmp_path))
    sessions = h.sessions.list(h.account_id)
    assert len(sessions) == 2 and all(s.kind == "conversation" for s in sessions)
    h.close()


async def test_http_binds_sessions_per_design(http_server: tuple[str, Harness]) -> None:
    base, harness = http_server
    with anyio.fail_after(30):
        # Handshake era on /mcp: each MCP session gets its own harness session.
        for _ in range(2):
            async with Client(f"{base}/mcp", mode="legacy") as c:
                assert c.protocol_version == "2025-11-25"
                await call(c, "write", {"address": "~/memory/h.txt", "content": "legacy"})
        # Stateless era on /mcp: every request lands in the agent's standing session.
        for _ in range(2):
            async with Client(f"{base}/mcp", mode="2026-07-28") as c:
                await call(c, "read", {"address": "~/memory/h.txt"})
        sessions = harness.sessions.list(harness.account_id)
        kinds = sorted(s.kind for s in sessions)
        assert kinds == ["conversation", "conversation", "standing"]
        standing = next(s for s in sessions if s.kind == "standing")
        assert [e.payload["name"] for e in harness.sessions.events(standing.id)] == ["read"] * 4
        # /mcp/sessions/{id} binds every request to that session, in both eras.
        target = next(s for s in sessions if s.kind == "conversation")
        before = len(harness.sessions.events(target.id))
        for mode in ("legacy", "2026-07-28"):
            async with Client(f"{base}/mcp/sessions/{target.id}", mode=mode) as c:
                await call(c, "read", {"address": "~/self"})
        assert len(harness.sessions.events(target.id)) == before + 4
        # A session that does not exist is a clean protocol error on every request, never a traceback.
        async with Client(f"{base}/mcp/sessions/no-such-session", mode="2026-07-28") as c:
            for request in (c.list_tools(), c.list_resources(), c.call_tool("read", {"address": "~/self"})):
                with pytest.raises(MCPError) as raised:
                    await request
                assert raised.value.error.code == -32602 and "No thread no-such-session" in raised.value.error.message


async def test_child_sessions_list_return_result_with_the_parents_schema(http_server: tuple[str, Harness]) -> None:
    base, harness = http_server
    agent = harness.agent()
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    with harness.db.transaction() as conn:
        conn.execute(
            "INSERT INTO runs (id, account_id, root_run_id, kind, agent_id, origin, title, status, input_cbor, "
            "created_at, updated_at) VALUES ('r1', ?, 'r1', 'agent', ?, 'agent', 'child', 'running', ?, 0, 0)",
            (harness.account_id, agent.id, cbor2.dumps({"spec": {"input": "brief", "output": schema}})),
        )
    child = harness.sessions.create(harness.account_id, agent.id, kind="child", run_id="r1")
    plain = harness.sessions.create(harness.account_id, agent.id)
    with anyio.fail_after(30):
        for mode in ("legacy", "2026-07-28"):
            async with Client(f"{base}/mcp/sessions/{child.id}", mode=mode) as c:
                tools = {t.name: t for t in (await c.list_tools()).tools}
                assert list(tools) == ["read", "write", "call", "delegate", "plan", "return_result"]
                assert tools["return_result"].input_schema == schema
            async with Client(f"{base}/mcp/sessions/{plain.id}", mode=mode) as c:
                assert "return_result" not in [t.name for t in (await c.list_tools()).tools]
            async with Client(f"{base}/mcp", mode=mode) as c:
                assert "return_result" not in [t.name for t in (await c.list_tools()).tools]


async def test_promoted_tools_appear_only_on_session_bound_endpoints(http_server: tuple[str, Harness]) -> None:
    """DESIGN §3 / HARNESS §5: the stateless /mcp endpoint serves the standing session with the five verbs only;
    the same session reached at /mcp/sessions/{id}, and a handshake-era /mcp session, list what was touched."""
    base, harness = http_server
    with anyio.fail_after(30):
        async with Client(f"{base}/mcp", mode="2026-07-28") as c:
            await call(c, "read", {"address": "~/tools/execute"})
            assert "execute" not in [t.name for t in (await c.list_tools()).tools]
        standing = next(s for s in harness.sessions.list(harness.account_id) if s.kind == "standing")
        for mode in ("legacy", "2026-07-28"):
            async with Client(f"{base}/mcp/sessions/{standing.id}", mode=mode) as c:
                assert [t.name for t in (await c.list_tools()).tools][-1] == "execute"
        async with Client(f"{base}/mcp", mode="legacy") as c:
            assert "execute" not in [t.name for t in (await c.list_tools()).tools]
            await call(c, "call", {"tool": "execute", "input": {"runtime": "shell", "code": "true"}})
            assert "execute" in [t.name for t in (await c.list_tools()).tools]


def test_non_loopback_http_requires_tokens(harness: Harness) -> None:
    from mcp_harness.errors import BadRequest

    with pytest.raises(BadRequest) as info:
        http_app(build_server(harness), host="0.0.0.0", http=HttpSettings())
    assert "without bearer tokens" in info.value.message and "[[http.tokens]]" in info.value.message
    tokens = [TokenSettings(hash=token_hash("t"))]
    assert http_app(build_server(harness), host="0.0.0.0", http=HttpSettings(tokens=tokens)) is not None


@pytest.fixture
async def token_server(tmp_path: Path) -> AsyncIterator[tuple[str, Harness]]:
    """HTTP on loopback with two hashed tokens: one for the default agent, one scoped to agent "other"."""
    harness = Harness(load_settings(data_dir=tmp_path))
    harness.agent()
    http = owner_and_other(harness, max_body_bytes=64 * 1024, allowed_origins=["https://app.example"])
    app = http_app(build_server(harness), host="127.0.0.1", http=http)
    async with serving(app) as base:
        yield base, harness
    harness.close()


def _authorized(url: str, token: str) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}))


async def test_tokens_authenticate_and_scope_requests_to_their_agent(token_server: tuple[str, Harness]) -> None:
    base, harness = token_server
    with anyio.fail_after(30):
        for mode in ("legacy", "2026-07-28"):
            async with Client(_authorized(f"{base}/mcp", "other-token"), mode=mode) as c:
                me = await call(c, "read", {"address": "~/self"})
                assert me["name"] == "other"
            async with Client(_authorized(f"{base}/mcp", "owner-token"), mode=mode) as c:
                assert (await call(c, "read", {"address": "~/self"}))["name"] == "assistant"
        default_session = harness.sessions.create(harness.account_id, harness.agent().id)
        async with Client(_authorized(f"{base}/mcp/sessions/{default_session.id}", "other-token"), mode="legacy") as c:
            with pytest.raises(MCPError) as raised:  # a scoped token cannot reach another agent's session
                await c.call_tool("read", {"address": "~/self"})
            assert "No thread" in raised.value.error.message
        async with Client(_authorized(f"{base}/mcp/sessions/{default_session.id}", "owner-token"), mode="legacy") as c:
            assert (await call(c, "read", {"address": "~/self"}))["name"] == "assistant"
        with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces a 401 as a transport error
            async with Client(_authorized(f"{base}/mcp", "wrong-token"), mode="legacy") as c:
                await c.list_tools()


async def test_http_refusals_on_the_wire(token_server: tuple[str, Harness]) -> None:
    import httpx2

    base, _ = token_server
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    good = {**accept, "Authorization": "Bearer owner-token"}
    async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
        missing = await http.post("/mcp", json=init, headers=accept)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        wrong = await http.post("/mcp", json=init, headers={**accept, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        hashed = await http.post(
            "/mcp", json=init, headers={**accept, "Authorization": f"Bearer {token_hash('owner-token')}"}
        )
        assert hashed.status_code == 401, "the stored hash itself is not a credential"
        evil = await http.post("/mcp", json=init, headers={**good, "Origin": "https://evil.example"})
        assert evil.status_code == 403 and "Origin" in evil.json()["error"]
        allowed = await http.post("/mcp", json=init, headers={**good, "Origin": "https://app.example"})
        assert allowed.status_code == 200
        local = await http.post("/mcp", json=init, headers={**good, "Origin": "http://localhost:3000"})
        assert local.status_code == 200
        rebinding = await http.post("/mcp", json=init, headers={**good, "Host": "attacker.example"})
        assert rebinding.status_code == 421
        huge = await http.post("/mcp", content=b"[" + b" " * (128 * 1024) + b"]", headers=good)
        assert huge.status_code == 413
        ok = await http.post("/mcp", json=init, headers=good)
        assert ok.status_code == 200


def test_config_stores_token_hashes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_harness.errors import BadRequest

    config = tmp_path / "c.toml"
    config.write_text('[[http.tokens]]\nhash = "plaintext-token"\nagent = "assistant"\n')
    with pytest.raises(BadRequest) as info:
        load_settings(config)
    assert "http.tokens.0.hash" in info.value.message
    config.write_text(f'[[http.tokens]]\nhash = "{token_hash("s3cret")}"\nagent = "assistant"\n')
    assert load_settings(config).http.tokens[0].agent == "assistant"
    monkeypatch.setenv("MCP_HARNESS_HTTP_TOKENS", "from-env")
    tokens = load_settings(config).http.tokens
    assert [t.hash for t in tokens] == [token_hash("s3cret"), token_hash("from-env")]
    assert "from-env" not in repr(tokens)


_NOISY_SERVER = """
import os, sys
import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp_harness.server import serve_stdio

async def on_list_tools(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="noisy", input_schema={"type": "object"})])

async def on_call_tool(ctx, params):
    print("stray print from a handler")
    os.write(1, b"stray bytes on fd 1\\n")
    os.system("echo stray output from a child process")
    return types.CallToolResult(content=[types.TextContent(type="text", text="x" * 300_000)])

async def main():
    await serve_stdio(Server("noisy", on_list_tools=on_list_tools, on_call_tool=on_call_tool))

anyio.run(main)
"""


async def test_pipe_transport_keeps_stray_output_off_the_wire_and_frames_large_replies() -> None:
    """The threadless stdio transport diverts fd 1 while serving (as the SDK's does): prints, raw writes and child
    processes land on stderr, never between JSON-RPC frames; a 300 KB reply arrives whole through a pipe buffer."""
    params = StdioServerParameters(command=sys.executable, args=["-c", _NOISY_SERVER])
    with anyio.fail_after(30):
        async with Client(params, mode="legacy") as c:
            result = await c.call_tool("noisy", {})
            assert result.content[0].text == "x" * 300_000  # pyright: ignore[reportAttributeAccessIssue]
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "r", "version": "0"}},
    }
    calls = [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "noisy"}} for i in (2, 3)]
    messages = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *calls]
    replies: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with await anyio.open_process([sys.executable, "-c", _NOISY_SERVER]) as proc:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            await proc.stdin.send("".join(json.dumps(m) + "\n" for m in messages).encode())
            buffer = b""
            async for chunk in proc.stdout:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                replies += [json.loads(line) for line in lines]  # every line must be a whole JSON-RPC frame
                if len(replies) == 3:
                    break
            await proc.stdin.aclose()
            stderr = b"".join([chunk async for chunk in proc.stderr]).decode()
            await proc.wait()
    assert [r["id"] for r in replies] == [1, 2, 3]
    assert replies[2]["result"]["content"][0]["text"] == "x" * 300_000
    assert stderr.count("stray print from a handler") == 2 and stderr.count("stray output from a child") == 2
    assert stderr.count("stray bytes on fd 1") == 2


def test_serve_answers_every_request_read_from_a_file(tmp_path: Path) -> None:
    """`mcp-harness serve < requests.jsonl` answers every request (replies still owed at end of input are waited
    for), then exits."""
    requests = tmp_path / "requests.jsonl"
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "0"}},
    }
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    requests.write_text(
        json.dumps(init)
        + "\n"
        + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        + "\n"
        + json.dumps(listing)
        + "\n"
    )
    env = {**os.environ, "MCP_HARNESS_DATA_DIR": str(tmp_path / "data")}
    with requests.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_harness", "serve"], stdin=stdin, capture_output=True, env=env, timeout=60
        )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [r["id"] for r in replies] == [1, 2]
    assert [t["name"] for t in replies[1]["result"]["tools"]] == ["read", "write", "call", "delegate", "plan"]
