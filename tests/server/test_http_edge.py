"""The HTTP edge over real HTTP (issue 12.1, 12.7, 12.8a, 12.8f): Host and Origin parsed and compared exactly, the
bind's loopback-ness taken from what it resolves to, an MCP session answering only the token that opened it, a
`/mcp/sessions/{id}` the caller may not see refused at connect, and SSE streams that resume with `Last-Event-ID`."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_harness.config import HttpSettings, load_settings
from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from mcp_harness.server.transports import session_visibility
from tests.conftest import owner_and_other, serving

pytestmark = pytest.mark.anyio

HANDSHAKE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HANDSHAKE}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def test_host_and_origin_are_parsed_and_compared_exactly(harness: Harness) -> None:
    http = HttpSettings(
        allowed_hosts=["mcp.example:443", "wild.example:*"],
        allowed_origins=["https://app.example", "http://dev.example:*"],
    )
    app = http_app(build_server(harness), host="127.0.0.1", http=http)
    hosts = {
        "127.0.0.1:{port}": 200,
        "localhost:{port}": 200,
        "LocalHost:{port}": 200,
        "[::1]:{port}": 200,
        "localhost": 200,
        "127.0.0.1": 200,
        "mcp.example:443": 200,
        "wild.example:1234": 200,
        "127.0.0.1:{port}@attacker.example": 421,
        "127.0.0.1:{port} attacker": 421,
        "127.0.0.1:{port}.attacker.example": 421,
        "localhost.attacker.example:{port}": 421,
        "127.1:{port}": 421,
        "attacker.example": 421,
        "mcp.example:8443": 421,
        "mcp.example": 421,
        "wild.example.attacker.example:1": 421,
    }
    origins = {
        "http://localhost": 200,
        "http://127.0.0.1": 200,
        "http://localhost:3000": 200,
        "https://[::1]:8443": 200,
        "https://app.example": 200,
        "https://app.example:443": 200,
        "http://dev.example:5173": 200,
        "http://localhost:1@evil.example": 403,
        "http://127.0.0.1:80.evil.example": 403,
        "http://localhost.evil.example": 403,
        "http://127.0.0.1/": 403,
        "null": 403,
        "https://app.example:8443": 403,
        "http://app.example": 403,
        "https://app.example.evil.example": 403,
    }
    async with serving(app) as base, httpx2.AsyncClient(base_url=base, timeout=30) as client:
        port = base.rsplit(":", 1)[1]
        for host, status in hosts.items():
            answer = await client.post("/mcp", json=INIT, headers={**ACCEPT, "Host": host.format(port=port)})
            assert answer.status_code == status, (host, answer.text)
        for origin, status in origins.items():
            answer = await client.post("/mcp", json=INIT, headers={**ACCEPT, "Origin": origin})
            assert answer.status_code == status, (origin, answer.text)
            if status == 403:
                assert "Origin" in answer.json()["error"]


def test_configured_hosts_and_origins_must_parse(harness: Harness) -> None:
    for http in (
        HttpSettings(allowed_hosts=["mcp.example/path"]),
        HttpSettings(allowed_hosts=["user@mcp.example"]),
        HttpSettings(allowed_origins=["https://app.example/"]),
        HttpSettings(allowed_origins=["app.example"]),
    ):
        with pytest.raises(BadRequest, match="is not"):
            http_app(build_server(harness), host="127.0.0.1", http=http)


def test_loopback_is_decided_from_every_resolved_address(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo
    names = {"127.attacker.test": ["0.0.0.0"], "mixed.test": ["127.0.0.1", "192.0.2.7"], "lo.test": ["127.0.0.2"]}

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:
        if host in names:
            return [info for address in names[host] for info in real(address, *args, **kwargs)]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for host in ("127.attacker.test", "mixed.test", "0.0.0.0", "::"):
        with pytest.raises(BadRequest, match="without bearer tokens"):
            http_app(build_server(harness), host=host, http=HttpSettings())
    for host in ("lo.test", "localhost", "127.0.0.1", "::1"):
        assert http_app(build_server(harness), host=host, http=HttpSettings()) is not None


@pytest.fixture
async def tokens(tmp_path: Path) -> AsyncIterator[tuple[str, Harness, Any]]:
    """Loopback HTTP with an owner token and one scoped to agent "other", checking `/mcp/sessions/{id}` at connect."""
    harness = Harness(load_settings(data_dir=tmp_path))
    harness.agent()
    http = owner_and_other(harness)
    app = http_app(build_server(harness), host="127.0.0.1", http=http, session_visible=session_visibility(harness))
    async with serving(app) as base:
        yield base, harness, app
    harness.close()


def _as(token: str, session_id: str | None = None) -> dict[str, str]:
    session = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"} if session_id else {}
    return {**ACCEPT, "Authorization": f"Bearer {token}", **session}


async def test_an_http_session_answers_only_the_token_that_opened_it(tokens: tuple[str, Harness, Any]) -> None:
    base, _, app = tokens
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with httpx2.AsyncClient(base_url=base, timeout=30) as http:
        opened = await http.post("/mcp", json=INIT, headers=_as("owner-token"))
        session = opened.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post("/mcp", json=initialized, headers=_as("owner-token", session))
        for method, body in (("POST", ping), ("GET", None), ("DELETE", None)):
            foreign = await http.request(method, "/mcp", json=body, headers=_as("other-token", session))
            unknown = await http.request(method, "/mcp", json=body, headers=_as("other-token", "f" * 32))
            assert foreign.status_code == unknown.status_code == 404, method
            assert foreign.content == unknown.content and json.loads(foreign.content)["error"]["code"] == -32600
            assert foreign.headers["content-type"] == unknown.headers["content-type"] == "application/json"
        mine = await http.post("/mcp", json=ping, headers=_as("owner-token", session))
        assert mine.status_code == 200 and '"id":2' in mine.text, "the owner's session survived"
        assert session in app.state.event_logs.logs
        assert (await http.delete("/mcp", headers=_as("owner-token", session))).status_code == 200
        assert (await http.post("/mcp", json=ping, headers=_as("owner-token", session))).status_code == 404
        assert session not in app.state.event_logs.logs, "its events went with it"


async def test_a_session_path_the_caller_may_not_see_is_refused_at_connect(tokens: tuple[str, Harness, Any]) -> None:
    base, harness, _ = tokens
    mine = harness.sessions.create(harness.account_id, harness.agent().id)
    missing = "00000000-0000-4000-8000-000000000000"
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": MODERN_META}}
    modern = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    async with httpx2.AsyncClient(base_url=base, timeout=30) as http:
        refusals = {}
        for token, session in (("owner-token", missing), ("other-token", mine.id)):
            url = f"/mcp/sessions/{session}"
            handshake = await http.post(url, json=INIT, headers=_as(token))
            stateless = await http.post(url, json=listing, headers={**_as(token), **modern})
            stream = await http.get(url, headers={**_as(token), "Accept": "text/event-stream"})
            for answer, request_id in ((handshake, 1), (stateless, 7), (stream, None)):
                assert answer.status_code == 404 and answer.headers["content-type"] == "application/json"
                reply = answer.json()
                assert reply["id"] == request_id and reply["error"]["code"] == -32602
                refusals[token] = reply["error"]["message"].replace(session, "<id>")
        assert refusals["owner-token"] == refusals["other-token"] and "No thread <id>" in refusals["owner-token"]
        assert (await http.post(f"/mcp/sessions/{mine.id}", json=INIT, headers=_as("owner-token"))).status_code == 200
    with anyio.fail_after(30):
        for mode in ("legacy", "2026-07-28"):
            transport = streamable_http_client(
                f"{base}/mcp/sessions/{missing}",
                http_client=httpx2.AsyncClient(headers={"Authorization": "Bearer owner-token"}),
            )
            if mode == "legacy":  # the handshake itself fails (the client's task group wraps the error)
                with pytest.RaisesGroup(pytest.RaisesExc(MCPError, match="No thread"), flatten_subgroups=True):
                    async with Client(transport, mode=mode):  # pyright: ignore[reportArgumentType]
                        pass
                continue
            async with Client(transport, mode=mode) as c:  # pyright: ignore[reportArgumentType]
                with pytest.raises(MCPError, match="No thread"):  # the stateless era has no handshake to fail
                    await c.list_tools()


def _events(stream: str) -> list[dict[str, str]]:
    """SSE events as field dicts (`id`, `retry`, `event`, `data`)."""
    events: list[dict[str, str]] = []
    for block in stream.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


async def test_a_dropped_stream_resumes_with_last_event_id(tmp_path: Path) -> None:
    harness = Harness(load_settings(data_dir=tmp_path))
    app = http_app(build_server(harness), host="127.0.0.1", http=HttpSettings())
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read", "arguments": {"address": "~/self"}},
    }  # noqa: E501
    async with serving(app) as base, httpx2.AsyncClient(base_url=base, timeout=30) as http:
        opened = await http.post("/mcp", json=INIT, headers=ACCEPT)
        priming, reply = _events(opened.text)
        assert priming["id"] and priming["retry"] == "2000" and priming["data"] == ""
        assert reply["id"] and json.loads(reply["data"])["id"] == 1
        session = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        answered = _events((await http.post("/mcp", json=call, headers=session)).text)
        assert answered[0]["data"] == "" and all(e["id"] for e in answered)
        # The client lost everything after the priming event: it reconnects from there and gets the rest.
        resume = {**session, "Accept": "text/event-stream", "Last-Event-ID": answered[0]["id"]}
        replayed: list[dict[str, str]] = []
        with anyio.fail_after(30):
            async with http.stream("GET", "/mcp", headers=resume) as stream:
                assert stream.status_code == 200
                text = ""
                async for chunk in stream.aiter_text():
                    text += chunk
                    replayed = [e for e in _events(text) if e.get("data")]
                    if any(json.loads(e["data"]).get("id") == 2 for e in replayed):
                        break
        assert [(e["id"], e["data"]) for e in replayed] == [(e["id"], e["data"]) for e in answered[1:]]
        assert json.loads(replayed[-1]["data"])["result"]["isError"] is False
    harness.close()


async def test_event_logs_are_bounded_and_replay_whole_or_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_types as types

    from mcp_harness.server import events

    def note(n: int, size: int = 0) -> types.JSONRPCMessage:
        return types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/message", params={"n": n, "x": "x" * size}
        )

    replayed: list[str] = []

    async def collect(event: Any) -> None:
        replayed.append(event.event_id)

    budget = events.EventBudget()
    log, other = events.EventLog(budget), events.EventLog(budget)
    budget.adopt("a", log)
    budget.adopt("b", other)
    ids = [await log.store_event("s1" if n % 2 else "s2", note(n)) for n in range(events.MAX_EVENTS_PER_SESSION + 10)]
    assert len(log.events) == events.MAX_EVENTS_PER_SESSION
    assert await log.replay_events_after(ids[0], collect) is None and not replayed, "evicted: no replay with a hole"
    assert await log.replay_events_after(ids[-5], collect) == "s1"
    assert replayed == [ids[-3], ids[-1]], "only the rest of that one stream"
    assert await other.replay_events_after(ids[-5], collect) is None, "another session's cursor replays nothing"
    big = events.MAX_BYTES_PER_SESSION // 3
    for n in range(4):
        await other.store_event("s", note(n, big))
    assert len(other.events) == 2 and other.bytes <= events.MAX_BYTES_PER_SESSION
    monkeypatch.setattr(events, "MAX_BYTES_TOTAL", other.bytes + 1000)
    await other.store_event("s", note(9, 200))
    assert budget.total <= events.MAX_BYTES_TOTAL and len(other.events) == 3
    assert 0 < len(log.events) < events.MAX_EVENTS_PER_SESSION, "the least recently written log gave way"
    budget.drop("a")
    budget.drop("b")
    assert budget.total == 0 and not budget.logs
