"""The MCP surface through the SDK client: tools/list, the event log, refusals, introspection reads, plan."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.harness import Harness
from mcp_harness.verbs.contracts import VERBS
from tests.conftest import call, refused, text_of

pytestmark = pytest.mark.anyio


async def test_tools_list_is_exactly_the_five_verbs_with_their_contracts(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == ["read", "write", "call", "delegate", "plan"]
    for tool in tools:
        spec = VERBS[tool.name]
        assert tool.input_schema == spec.input_schema and tool.description == spec.description
    by_name = {t.name: t for t in tools}
    ann = {name: t.annotations for name, t in by_name.items()}
    assert ann["read"] is not None and ann["read"].read_only_hint is True
    assert ann["write"] is not None and ann["write"].destructive_hint is True and not ann["write"].read_only_hint
    assert ann["call"] is not None and ann["call"].open_world_hint is True
    assert ann["delegate"] is not None and ann["delegate"].open_world_hint is True
    assert by_name["delegate"].output_schema == VERBS["delegate"].output_schema
    assert all(by_name[n].output_schema is None for n in ("read", "write", "call", "plan"))


async def test_every_verb_call_is_logged_with_actor_agent(client: Client, harness: Harness) -> None:
    await call(client, "write", {"address": "~/memory/a.txt", "content": "x"})
    await refused(client, "read", {"address": "~/memory/missing"})
    await call(client, "plan", {"steps": [{"id": "s1", "label": "one", "status": "pending"}]})
    sessions = harness.sessions.list(harness.account_id)
    assert len(sessions) == 1
    events = harness.sessions.events(sessions[0].id)
    assert [(e.seq, e.type, e.actor) for e in events] == [
        (1, "tool_call", "agent"),
        (2, "tool_result", "agent"),
        (3, "tool_call", "agent"),
        (4, "tool_result", "agent"),
    ]
    assert events[0].payload["name"] == "write" and events[0].payload["input"]["content"] == "x"
    assert events[1].payload["toolCallId"] == events[0].payload["id"]
    assert events[1].payload["output"]["path"] == "a.txt" and "error" not in events[1].payload
    assert events[3].payload["error"] == "Memory file not found: missing" and "output" not in events[3].payload


async def test_unrecognized_addresses_name_the_supported_forms(client: Client) -> None:
    error = await refused(client, "read", {"address": "/etc/passwd"})
    assert error["message"].startswith("Unrecognized address: /etc/passwd. Supported: ~/memory/<path>")
    error = await refused(client, "read", {"address": "   "})
    assert error["message"].startswith("read requires an address")
    error = await refused(client, "write", {"address": "~/self", "content": "x"})
    assert error["message"].startswith("Unrecognized write address: ~/self.")
    error = await refused(client, "read", {"address": "~/memory/a", "format": "yaml"})
    assert "$.format" in error["message"]


async def test_unknown_tool_is_a_protocol_error(client: Client) -> None:
    with pytest.raises(MCPError) as info:
        await client.call_tool("bash", {"cmd": "ls"})
    assert "Unknown tool 'bash'" in info.value.message


async def test_self_describes_the_agent_without_secrets(client: Client, harness: Harness) -> None:
    await call(client, "write", {"address": "~/memory/docs/x.md", "content": "12"})
    await call(client, "write", {"address": "~/memory/top.txt", "content": "1"})
    data = await call(client, "read", {"address": "~/self"})
    agent = harness.agent()
    assert data["agentId"] == agent.id and data["name"] == "assistant" and data["model"] == "scripted"
    assert data["summary"] == 'You are "assistant" (scripted) with 0 triggers and 1 conversation.'
    assert data["grants"] == {"callableTools": ["search", "execute"], "publish": True}
    assert data["memory"] == {"totalFiles": 2, "topLevel": ["docs/ (1 file, 2 bytes)", "top.txt"]}
    assert data["sessionCount"] == 1 and len(data["guidance"]) == 4
    assert "signingKeys" not in data
    same = await call(client, "read", {"address": "harness://self"})
    assert same["agentId"] == agent.id


async def test_tools_listing_and_contracts(client: Client) -> None:
    listing = await client.call_tool("read", {"address": "~/tools/"})
    data = listing.structured_content
    assert data is not None and data["summary"] == "5 verbs and 2 callable tools."
    assert "- read — Read anything you can address." in text_of(listing)
    contract = await client.call_tool("read", {"address": "~/tools/write"})
    assert text_of(contract) == VERBS["write"].contract_markdown()
    assert text_of(contract).startswith("# write\n\nWrite anything you can address.")
    delegate = await call(client, "read", {"address": "harness://tools/delegate", "format": "json"})
    assert delegate["output"] == VERBS["delegate"].output_schema
    missing = await call(client, "read", {"address": "~/tools/nope"})
    assert missing["summary"] == "No tool named nope. Here is what you can read and call."


async def test_thread_listing_search_and_transcript(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    other = harness.sessions.create(harness.account_id, agent.id, title="Billing migration")
    harness.sessions.append(
        other.id, {"type": "message", "role": "user", "content": "please move the cron job"}, "user"
    )
    await call(client, "write", {"address": "~/memory/a.txt", "content": "x"})
    listing = await call(client, "read", {"address": "thread:"})
    assert len(listing["threads"]) == 2
    assert listing["threads"][0]["title"].startswith("MCP session")  # the newest: this one, just written to
    by_title = await call(client, "read", {"address": "thread:", "options": {"query": "billing"}})
    assert [t["thread"] for t in by_title["threads"]] == [f"thread:{other.id}"]
    by_text = await call(client, "read", {"address": "thread:", "options": {"query": "CRON"}})
    assert by_text["threads"][0]["snippet"] == "please move the cron job"
    limited = await call(client, "read", {"address": "thread:", "options": {"limit": 1}})
    assert len(limited["threads"]) == 1
    none = await call(client, "read", {"address": "thread:", "options": {"agentId": "nobody"}})
    assert none["threads"] == []
    for bad in ("ten", -5, 0, 101, 1000, 1.5, True):
        error = await refused(client, "read", {"address": "thread:", "options": {"limit": bad}})
        assert "limit must be an integer from 1 to 100" in error["message"], bad
    transcript = await call(client, "read", {"address": f"thread:{other.id}"})
    assert transcript["summary"] == 'Thread "Billing migration": 1 recent event.'
    assert transcript["markdown"] == "[1] user: **user**: please move the cron job"
    error = await refused(client, "read", {"address": "thread:no-such-id"})
    assert error["status"] == 404


async def test_thread_read_keeps_the_last_200_events(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    s = harness.sessions.create(harness.account_id, agent.id, title="long")
    for i in range(205):
        harness.sessions.append(s.id, {"type": "message", "role": "assistant", "content": f"m{i}"}, "agent")
    data = await call(client, "read", {"address": f"thread:{s.id}", "format": "json"})
    assert [e["seq"] for e in data["events"]] == list(range(6, 206))
    assert data["events"][0]["actor"] == "agent"


async def test_plan_replaces_the_checklist_and_writes_no_event(client: Client, harness: Harness) -> None:
    steps = [
        {"id": "s1", "label": "Gather", "status": "done"},
        {"id": "s2", "label": "Write", "status": "running"},
    ]
    assert await call(client, "plan", {"title": "Report", "steps": steps}) == {
        "ok": True,
        "steps": 2,
        "summary": "Plan saved (2 steps).",
    }
    resource = (await client.read_resource("harness://plan")).contents[0]
    assert isinstance(resource, types.TextResourceContents)
    assert (
        resource.text
        == "Plan: 1 of 2 steps settled.\n\n# Report\n\n- [x] s1 · Gather · done\n- [~] s2 · Write · running"
    )
    await call(client, "plan", {"steps": [{"id": "s3", "label": "Only", "status": "pending"}]})
    data = await call(client, "read", {"address": "harness://plan", "format": "json"})
    assert data["steps"] == [{"id": "s3", "label": "Only", "status": "pending"}] and "title" not in data
    error = await refused(
        client, "plan", {"steps": [{"id": "s1", "label": "x", "status": "done", "resolvedBy": "runtime"}]}
    )
    assert "resolvedBy" in error["message"]
    error = await refused(client, "plan", {"steps": [{"id": "s1", "label": "x", "status": "finished"}]})
    assert "$.steps[0].status" in error["message"]
    sessions = harness.sessions.list(harness.account_id)
    assert [e.payload["name"] for e in harness.sessions.events(sessions[0].id)] == ["read", "read"]


async def test_plan_refuses_what_its_contract_forbids_naming_the_limit(client: Client) -> None:
    steps = [{"id": f"s{i}", "label": f"step {i}", "status": "pending"} for i in range(101)]
    assert "$.steps" in (await refused(client, "plan", {"steps": steps}))["message"]
    assert (await call(client, "plan", {"steps": steps[:100]}))["steps"] == 100
    long_label = [{"id": "s1", "label": "x" * 201, "status": "pending"}]
    assert "$.steps[0].label" in (await refused(client, "plan", {"steps": long_label}))["message"]
    assert "$.title" in (await refused(client, "plan", {"title": "t" * 201, "steps": steps[:1]}))["message"]
    twice = [{"id": "a", "label": "one", "status": "pending"}, {"id": "a", "label": "two", "status": "pending"}]
    assert "repeated: a" in (await refused(client, "plan", {"steps": twice}))["message"]
    data = await call(client, "read", {"address": "harness://plan", "format": "json"})
    assert len(data["steps"]) == 100, "a refused plan changes nothing"
