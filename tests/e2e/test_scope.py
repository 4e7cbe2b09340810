"""Scope as a matrix, over real HTTP with real tokens (issue 12.1): two agents × three tokens × every route.

Agents `assistant` and `other` each hold a conversation with a secret in it, a delegated child run and a private
memory file. Tokens: one scoped to each agent and an owner token. A scoped token sees and touches only its agent's
sessions, runs, children and memory; the owner sees everything; and a refusal about the other agent's thing reads
exactly like a thing that does not exist.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.config import HttpSettings, TokenSettings, token_hash
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from mcp_harness.server.transports import session_visibility
from tests.conftest import call, refused, scripted_harness, serving

pytestmark = pytest.mark.anyio

AGENTS = ("assistant", "other")
CALLERS = ("assistant", "other", "owner")
MISSING = "00000000-0000-4000-8000-000000000000"
PEEK = {"address": "thread:", "options": {"query": "secret-assistant"}}
RULES: list[dict[str, Any]] = [
    {"when": "Peek at the threads", "turns": [{"toolCalls": [{"name": "read", "input": PEEK}]}, {"text": "peeked"}]},
    {"turns": [{"text": "child done"}]},
]


@dataclass
class World:
    base: str
    harness: Harness
    agent_ids: dict[str, str]
    sessions: dict[str, str]
    """Each agent's conversation (with its secret)."""
    runs: dict[str, str]
    """Each agent's delegated child run."""
    children: dict[str, str]
    """Each agent's child session."""


def client(world: World, caller: str, path: str = "/mcp", mode: str = "2026-07-28") -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {caller}-token"}
    transport = streamable_http_client(world.base + path, http_client=httpx2.AsyncClient(headers=headers))
    return Client(transport, mode=mode)  # pyright: ignore[reportArgumentType]


def allowed(caller: str, owner: str) -> bool:
    return caller == "owner" or caller == owner


def as_missing(message: str, real_id: str) -> str:
    """A refusal with the id it names swapped for a missing one: a foreign thing must read like a missing one."""
    return message.replace(real_id, MISSING)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    harness = scripted_harness(tmp_path, RULES)
    ids = {"assistant": harness.agent().id}
    definition = {**harness.default_definition().to_json(), "name": "other"}
    ids["other"] = harness.agents.create(harness.account_id, normalize_definition(definition)).id
    http = HttpSettings(
        tokens=[
            TokenSettings(hash=token_hash("owner-token"), label="owner"),
            TokenSettings(hash=token_hash("assistant-token"), agent="assistant", label="assistant"),
            TokenSettings(hash=token_hash("other-token"), agent="other", label="other"),
        ]
    )
    app = http_app(build_server(harness), host="127.0.0.1", http=http, session_visible=session_visibility(harness))
    async with harness.engine_running(), serving(app) as base:
        world = World(base, harness, ids, {}, {}, {})
        with anyio.fail_after(60):
            for agent in AGENTS:
                async with client(world, agent, mode="legacy") as c:
                    await call(c, "write", {"address": "~/memory/private.txt", "content": f"secret-{agent}"})
                    await call(c, "read", {"address": "~/memory/private.txt"})
                    done = await call(c, "delegate", {"brief": f"secret-{agent} child task"})
                    assert done["status"] == "succeeded"
                    world.runs[agent], world.children[agent] = done["runId"], done["sessionId"]
                    world.sessions[agent] = harness.sessions.get(done["sessionId"]).parent_session_id or ""
            yield world
    harness.close()


@pytest.mark.parametrize("caller", CALLERS)
async def test_thread_and_run_reads_reach_only_what_the_token_may_see(world: World, caller: str) -> None:
    async with client(world, caller) as c:
        for owner in AGENTS:
            for address, real in (
                (f"thread:{world.sessions[owner]}", world.sessions[owner]),
                (f"thread:{world.children[owner]}", world.children[owner]),
                (f"run:{world.runs[owner]}", world.runs[owner]),
            ):
                if allowed(caller, owner):
                    data = await call(c, "read", {"address": address, "format": "json"})
                    assert real in str(data)
                    continue
                error = await refused(c, "read", {"address": address})
                missing = await refused(c, "read", {"address": address.replace(real, MISSING)})
                assert as_missing(error["message"], real) == missing["message"] and error["status"] == 404


@pytest.mark.parametrize("caller", CALLERS)
async def test_thread_listings_and_search_show_only_visible_sessions(world: World, caller: str) -> None:
    async with client(world, caller) as c:
        listed = await call(c, "read", {"address": "thread:", "options": {"limit": 100}})
        shown = {t["thread"].removeprefix("thread:") for t in listed["threads"]}
        for owner in AGENTS:
            own = {world.sessions[owner], world.children[owner]}
            assert (own <= shown) == allowed(caller, owner) and bool(own & shown) == allowed(caller, owner)
            found = await call(c, "read", {"address": "thread:", "options": {"query": f"secret-{owner}"}})
            assert bool(found["threads"]) == allowed(caller, owner), (caller, owner, found)
            filtered = await call(c, "read", {"address": "thread:", "options": {"agentId": world.agent_ids[owner]}})
            assert bool(filtered["threads"]) == allowed(caller, owner)


@pytest.mark.parametrize("caller", CALLERS)
async def test_resources_read_threads_only_where_the_token_may(world: World, caller: str) -> None:
    async with client(world, caller) as c:
        for owner in AGENTS:
            uri = f"thread:{world.sessions[owner]}"
            if allowed(caller, owner):
                text = (await c.read_resource(uri)).contents[0].text  # pyright: ignore[reportAttributeAccessIssue]
                assert f"secret-{owner}" in text
                continue
            with pytest.raises(MCPError) as foreign:
                await c.read_resource(uri)
            with pytest.raises(MCPError) as missing:
                await c.read_resource(f"thread:{MISSING}")
            assert foreign.value.error.code == missing.value.error.code
            assert as_missing(foreign.value.error.message, world.sessions[owner]) == missing.value.error.message


@pytest.mark.parametrize("caller", CALLERS)
async def test_memory_and_self_are_always_the_tokens_own_agent(world: World, caller: str) -> None:
    me = "assistant" if caller == "owner" else caller
    async with client(world, caller) as c:
        assert (await call(c, "read", {"address": "~/memory/private.txt"}))["content"] == f"secret-{me}"
        assert (await call(c, "read", {"address": "~/self"}))["agentId"] == world.agent_ids[me]
        listing = await c.list_resources()
        assert f"thread:{world.sessions['other' if me == 'assistant' else 'assistant']}" not in {
            str(r.uri) for r in listing.resources
        }


@pytest.mark.parametrize("caller", CALLERS)
async def test_delegate_agent_id_names_only_agents_the_token_may_act_as(world: World, caller: str) -> None:
    async with client(world, caller) as c:
        for owner in AGENTS:
            spec = {"brief": "Run as someone", "agentId": world.agent_ids[owner]}
            if allowed(caller, owner):
                done = await call(c, "delegate", spec)
                assert done["status"] == "succeeded"
                child = world.harness.sessions.get(done["sessionId"])
                assert child.agent_id == world.agent_ids[owner]
                run = world.harness.runs.get(done["runId"])
                assert run.input.get("scopeAgentId") == (None if caller == "owner" else world.agent_ids[caller])
                continue
            foreign = await refused(c, "delegate", spec)
            missing = await refused(c, "delegate", {**spec, "agentId": MISSING})
            assert as_missing(foreign["message"], world.agent_ids[owner]) == missing["message"]
            assert foreign["status"] == missing["status"] == 404


@pytest.mark.parametrize("caller", CALLERS)
async def test_session_endpoints_bind_only_visible_sessions(world: World, caller: str) -> None:
    for owner in AGENTS:
        for session in (world.sessions[owner], world.children[owner]):
            for mode in ("legacy", "2026-07-28"):
                if allowed(caller, owner):
                    async with client(world, caller, f"/mcp/sessions/{session}", mode) as c:
                        me = await call(c, "read", {"address": "~/self"})
                        assert me["agentId"] == world.agent_ids[owner]
                    continue
                with pytest.raises(Exception) as foreign:  # noqa: B017 - refused at connect or on the first request
                    async with client(world, caller, f"/mcp/sessions/{session}", mode) as c:
                        await c.list_tools()
                with pytest.raises(Exception) as missing:  # noqa: B017
                    async with client(world, caller, f"/mcp/sessions/{MISSING}", mode) as c:
                        await c.list_tools()
                assert as_missing(str(foreign.value), session) == str(missing.value)


@pytest.mark.parametrize("caller", CALLERS)
async def test_a_tokens_children_stay_confined_down_the_tree(world: World, caller: str) -> None:
    """A child started by a scoped token runs in that scope: its own `read thread:` sees only its agent's threads."""
    async with client(world, caller) as c:
        done = await call(c, "delegate", {"brief": "Peek at the threads"})
    events = world.harness.sessions.events(done["sessionId"])
    result = next(e.payload for e in events if e.type == "tool_result")
    found = {t["thread"].removeprefix("thread:") for t in result["output"]["threads"]}
    assert (world.children["assistant"] in found) == allowed(caller, "assistant"), found
