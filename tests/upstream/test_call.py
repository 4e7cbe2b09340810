"""`call` of an upstream tool through our server (issue 20 points 2 and 3), against the Python SDK fixture server over
stdio (a 2026-07-28 era upstream): documents, touch-expand, results unchanged, isError, progress, cancellation,
promotion, resources and the log."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, refused

pytestmark = pytest.mark.anyio


async def test_listing_shows_the_tools_under_their_server_with_a_contract_each(fx_client: Client) -> None:
    listing = await call(fx_client, "read", {"address": "~/tools/"})
    names = {n for n in listing["tools"] if n.startswith("mcp__fx__")}
    assert names >= {"mcp__fx__add", "mcp__fx__echo", "mcp__fx__fail", "mcp__fx__grow", "mcp__fx__pid", "mcp__fx__slow"}
    heading = "MCP server fx (read mcp://fx/ for its resources):"
    assert heading + "\n- mcp__fx__add — Add two integers;" in listing["markdown"]
    contract = await call(fx_client, "read", {"address": "~/tools/mcp__fx__add"})
    assert contract["kind"] == "mcp" and contract["cid"].startswith("bafy")
    assert contract["input"]["required"] == ["a", "b"] and contract["output"]["properties"]["total"]
    assert contract["binding"] == "mcp://fx/add"
    assert "> mcp tool · version `" + contract["cid"] + "`" in contract["contract"]
    assert "Tool add of the MCP server fx" in contract["contract"]


async def test_a_result_comes_back_as_the_upstream_sent_it(fx_client: Client) -> None:
    result = await fx_client.call_tool("call", {"tool": "mcp__fx__add", "input": {"a": 2, "b": 3}})
    assert not result.is_error
    assert result.structured_content == {"total": 5}
    assert [block.model_dump(exclude_none=True) for block in result.content] == [
        {"type": "text", "text": '{\n  "total": 5\n}'}
    ]


async def test_invalid_input_returns_the_contract_and_the_errors(fx_client: Client) -> None:
    data = await call(fx_client, "call", {"tool": "mcp__fx__add", "input": {"a": "two"}})
    assert data["summary"].startswith("Input for mcp__fx__add did not match its contract")
    assert "$: 'b' is a required property" in data["validationErrors"]
    assert "$.a: 'two' is not of type 'integer'" in data["validationErrors"]
    assert data["contract"].startswith("# mcp__fx__add")


async def test_an_upstream_tool_error_stays_an_error(fx_client: Client) -> None:
    result = await fx_client.call_tool("call", {"tool": "mcp__fx__fail", "input": {"reason": "because"}})
    assert result.is_error
    assert "failed on purpose: because" in result.content[0].text  # pyright: ignore[reportAttributeAccessIssue]


async def test_an_unknown_upstream_tool_gets_the_listing(fx_client: Client) -> None:
    data = await call(fx_client, "call", {"tool": "mcp__fx__nope", "input": {}})
    assert data["summary"] == "No callable tool named mcp__fx__nope. Here is what you can call."
    assert "mcp__fx__echo" in data["tools"]


async def test_progress_is_relayed_to_our_client(fx_client: Client) -> None:
    seen: list[str | None] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    result = await fx_client.call_tool(
        "call", {"tool": "mcp__fx__slow", "input": {"seconds": 0.2}}, progress_callback=progress
    )
    assert not result.is_error
    assert seen == ["fx: 1/4 step 1", "fx: 2/4 step 2", "fx: 3/4 step 3", "fx: 4/4 step 4"]


async def _until(path: Path) -> None:
    with anyio.fail_after(20):
        while not path.exists():
            await anyio.sleep(0.02)


async def test_our_clients_cancellation_cancels_the_upstream_call(fx_client: Client, marks: Path) -> None:
    for mark in ("slow-started", "cancelled"):
        (marks / mark).unlink(missing_ok=True)
    async with anyio.create_task_group() as tg:

        async def slow() -> None:
            await fx_client.call_tool("call", {"tool": "mcp__fx__slow", "input": {"seconds": 30}})

        tg.start_soon(slow)
        await _until(marks / "slow-started")
        tg.cancel_scope.cancel()
    await _until(marks / "cancelled")
    # The connection stays usable after the cancelled call.
    assert (await call(fx_client, "call", {"tool": "mcp__fx__echo", "input": {"text": "still"}})) == {"result": "still"}


async def test_a_used_upstream_tool_is_promoted_to_a_real_tool(fx_client: Client) -> None:
    before = {t.name for t in (await fx_client.list_tools()).tools}
    await call(fx_client, "read", {"address": "~/tools/mcp__fx__pid"})
    tools = {t.name: t for t in (await fx_client.list_tools()).tools}
    assert "mcp__fx__pid" not in before and "mcp__fx__pid" in tools
    assert tools["mcp__fx__pid"].annotations is not None
    direct = await fx_client.call_tool("mcp__fx__pid", {})
    assert isinstance((direct.structured_content or {}).get("result"), int)


async def test_every_call_is_logged_with_actor_server_and_tool(
    fx_client: Client, fixture_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="mcp_harness.callables.upstream_call"):
        await call(fx_client, "call", {"tool": "mcp__fx__echo", "input": {"text": "logged"}})
    assert any("actor=agent" in r.message and "server=fx tool=echo" in r.message for r in caplog.records)
    session = fixture_harness.sessions.list(fixture_harness.account_id)[0]
    events = fixture_harness.sessions.events(session.id)
    assert events[-2].payload["input"] == {"tool": "mcp__fx__echo", "input": {"text": "logged"}}
    output: dict[str, Any] = events[-1].payload["output"]
    assert output["server"] == "fx" and output["tool"] == "echo" and output["text"] == "logged"
    assert events[-1].actor == "agent"


async def test_resources_are_listed_and_read(fx_client: Client) -> None:
    listing = await call(fx_client, "read", {"address": "mcp://fx/"})
    assert [r["uri"] for r in listing["resources"]] == ["note://hello"]
    note = await call(fx_client, "read", {"address": "mcp://fx/note://hello"})
    assert note["contents"][0]["text"] == "hello from the fixture"
    error = await refused(fx_client, "read", {"address": "mcp://nothere/x"})
    assert error["code"] == "not-found" and "mcp://fx/" in error["message"]


async def test_a_refresh_rewrites_only_the_documents_that_changed(fixture_harness: Harness) -> None:
    async with Client(build_server(fixture_harness), mode="2026-07-28") as c:
        await call(c, "call", {"tool": "mcp__fx__grow", "input": {"name": "grown"}})
        # The server announces the new tool on our listen stream; a refresh racing that re-listing finds it either
        # way, and rewrites nothing else.
        report = await fixture_harness.upstreams.refresh("fx")
        assert report.changed == () and report.removed == () and report.added in ((), ("mcp__fx__grown",))
        before = {r.name: r for r in fixture_harness.upstream_store.tools(["fx"])}
        assert "mcp__fx__grown" in before
        report = await fixture_harness.upstreams.refresh("fx")
        assert report.added == report.changed == report.removed == ()
        after = {r.name: r for r in fixture_harness.upstream_store.tools(["fx"])}
        assert all(after[n].updated_at == before[n].updated_at and after[n].cid == before[n].cid for n in before)
        data = await call(c, "call", {"tool": "mcp__fx__grown", "input": {"text": "new"}})
        assert data == {"result": "new"}


async def test_the_space_index_names_the_upstream_tools(fx_client: Client, fixture_harness: Harness) -> None:
    from mcp_harness.runs.prompt import space_index

    await call(fx_client, "read", {"address": "~/tools/"})
    index = space_index(fixture_harness, fixture_harness.agent())
    assert "- mcp__fx__echo — Echo the text back." in index
