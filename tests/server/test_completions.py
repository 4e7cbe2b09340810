"""`completion/complete` through the SDK Client: each resource template's parameters, scope-checked like reads."""

from __future__ import annotations

import json

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.binding import SessionBinding
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from mcp_harness.resources import RESOURCE_TEMPLATES
from mcp_harness.server import build_server
from mcp_harness.server.completions import PARAMETERS, complete_sync
from mcp_harness.server.subscriptions import Watch
from tests.conftest import call
from tests.spaces.conftest import grant

pytestmark = pytest.mark.anyio


def _ref(uri: str) -> types.ResourceTemplateReference:
    return types.ResourceTemplateReference(type="ref/resource", uri=uri)


async def _values(c: Client, uri: str, name: str, value: str, **known: str) -> list[str]:
    result = await c.complete(_ref(uri), {"name": name, "value": value}, context_arguments=known or None)
    return result.completion.values


def test_every_template_has_its_parameters() -> None:
    assert set(PARAMETERS) == {t.uri_template for t in RESOURCE_TEMPLATES}


async def test_completes_memory_tools_threads_and_runs(client: Client, harness: Harness) -> None:
    await call(client, "write", {"address": "~/memory/notes/a.md", "content": "a"})
    await call(client, "write", {"address": "~/memory/notes/b.md", "content": "b"})
    await call(client, "write", {"address": "~/memory/other.md", "content": "c"})
    assert await _values(client, "harness://memory/{path}", "path", "notes/") == ["notes/a.md", "notes/b.md"]
    assert await _values(client, "harness://tools/{name}", "name", "pl") == ["plan"]
    assert "execute" in await _values(client, "harness://tools/{name}", "name", "")
    session = harness.sessions.list(harness.account_id)[0]
    assert await _values(client, "thread:{id}", "id", session.id[:4]) == [session.id]
    run = harness.runs.enqueue(account_id=harness.account_id, title="t", origin="user", agent_id=harness.agent().id)
    assert run.id in await _values(client, "run:{id}", "id", "")
    assert await _values(client, "ipfs://{cid}", "cid", "bafy") == []
    assert await _values(client, "harness://triggers/{name}", "name", "") == []
    source = {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}}
    for name in ("daily", "weekly"):
        trigger = json.dumps({"source": source, "prompt": f"The {name} note."})
        await call(client, "write", {"address": f"~/triggers/{name}", "content": trigger})
    assert await _values(client, "harness://triggers/{name}", "name", "d") == ["daily"]


async def test_bad_references_name_what_is_accepted(client: Client) -> None:
    with pytest.raises(MCPError) as info:
        await _values(client, "harness://nothing/{x}", "x", "")
    assert info.value.code == -32602 and "Templates: harness://memory/{path}" in info.value.message
    with pytest.raises(MCPError) as info:
        await _values(client, "hm://{account}/{path}", "cid", "")
    assert info.value.message == "hm://{account}/{path} has no parameter 'cid'; it takes account, path."
    with pytest.raises(MCPError) as info:
        await client.complete(types.PromptReference(type="ref/prompt", name="p"), {"name": "a", "value": ""})
    assert "no prompts" in info.value.message


async def test_a_confined_caller_completes_and_subscribes_only_its_agents_things(harness: Harness) -> None:
    """A token scoped to agent "other" neither completes nor subscribes to the default agent's runs and sessions."""
    harness.agents.create(
        harness.account_id, normalize_definition({**harness.default_definition().to_json(), "name": "other"})
    )
    mine = harness.runs.enqueue(account_id=harness.account_id, title="t", origin="user", agent_id=harness.agent().id)
    theirs = harness.runs.enqueue(
        account_id=harness.account_id, title="t", origin="user", agent_id=harness.agent("other").id
    )
    other = SessionBinding(harness, agent_id=harness.agent("other").id, confined_to="other")
    assert complete_sync(other, "run:{id}", "id", "", {}) == [theirs.id]
    owner = SessionBinding(harness, agent_id=harness.agent().id)
    assert set(complete_sync(owner, "run:{id}", "id", "", {})) == {mine.id, theirs.id}
    watch = Watch(_hub(harness), other)
    with pytest.raises(MCPError) as info:
        await watch.add(f"run:{mine.id}", "2025-11-25")
    assert info.value.message == f"No run {mine.id}." and info.value.code == -32002
    await watch.add(f"run:{theirs.id}", "2025-11-25")
    assert list(watch.versions) == [f"run:{theirs.id}"]


def _hub(harness: Harness):  # noqa: ANN202 - a test helper
    from mcp_harness.server.subscriptions import Subscriptions

    async def bound(ctx: object) -> SessionBinding:
        raise AssertionError("not called")

    return Subscriptions(harness, bound)


async def test_hm_accounts_and_paths(harness: Harness) -> None:
    alice = create_identity(harness, "Alice")
    grant(harness, alice)
    async with Client(build_server(harness), mode="legacy") as c:
        for path in ("notes", "notes/birds", "recipes"):
            await call(
                c,
                "write",
                {"address": f"hm://{alice.account_id}/{path}", "content": f"# {path}", "options": {"name": path}},
            )
        assert await _values(c, "hm://{account}/{path}", "account", alice.account_id[:6]) == [alice.account_id]
        paths = await _values(c, "hm://{account}/{path}", "path", "no", account=alice.account_id)
        assert paths == ["notes", "notes/birds"]
        assert await _values(c, "hm://{account}/{path}", "path", "", account="z6MkNobody") == []
