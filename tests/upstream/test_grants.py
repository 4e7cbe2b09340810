"""Authority over upstream tools (issue 20 point 4): grants name them exactly or per server (`mcp__fx__*`), an
ungranted tool or server reads as absent, a revoked grant takes effect at once, an agent-scoped token never reaches
an ungranted server, and delegate's `tools` narrows them."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_harness.config import HttpSettings, TokenSettings, token_hash
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest
from mcp_harness.grants import check_grant_names, may, narrowed, upstream_granted
from mcp_harness.harness import Harness
from mcp_harness.runs.agent import effective_agent
from mcp_harness.server import build_server, http_app
from tests.conftest import call, refused, serving
from tests.upstream.conftest import fixture_command, mounting

pytestmark = pytest.mark.anyio
RAW = [sys.executable, str(Path(__file__).with_name("raw_server.py"))]


@pytest.fixture(scope="module")
def granted_harness(tmp_path_factory: pytest.TempPathFactory, marks: Path) -> Iterator[Harness]:
    """`fx` (the fixture) and `raw` mounted; the default agent is granted fx's echo and all of raw."""
    home = tmp_path_factory.mktemp("grants")
    h = mounting(home, [{"name": "fx", "command": fixture_command(marks)}, {"name": "raw", "command": RAW}])
    agent = h.agent()
    h.agents.update(agent.id, dataclasses.replace(agent.definition, tools=("mcp__fx__echo", "mcp__raw__*")))
    yield h
    h.close()


@pytest.fixture(scope="module")
async def client(granted_harness: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(granted_harness), mode="legacy") as c:
        yield c


def definition(tools: list[str] | None) -> Any:
    raw: dict[str, Any] = {"name": "a", "systemPrompt": "Help.", "modelProvider": "scripted", "model": "m"}
    if tools is not None:
        raw["tools"] = tools
    return normalize_definition(raw)


def test_one_rule_decides_exact_names_and_server_wildcards() -> None:
    both = definition(["mcp__fx__*", "mcp__raw__malformed"])
    assert upstream_granted(both, "mcp__fx__anything") and upstream_granted(both, "mcp__raw__malformed")
    assert not upstream_granted(both, "mcp__raw__rpc_error") and not upstream_granted(both, "mcp__other__x")
    assert upstream_granted(definition(None), "mcp__any__tool")  # unset tools grants everything, as for builtins
    assert may(None, both, "mcp__fx__read_file") and not may(None, definition(["search"]), "mcp__fx__read_file")  # pyright: ignore[reportArgumentType]
    check_grant_names(["mcp__fx__*", "mcp__fx__read_file", "search"])
    with pytest.raises(BadRequest, match="mcp__<server>__<tool> or mcp__<server>__\\*"):
        check_grant_names(["mcp__Bad_Name__x"])


def test_delegates_tools_narrow_upstream_grants_and_never_widen_them() -> None:
    parent = ("mcp__fx__*", "mcp__raw__malformed", "search")
    assert narrowed(parent, ["mcp__fx__echo", "mcp__fx__*", "mcp__raw__rpc_error", "mcp__raw__*"]) == [
        "mcp__fx__echo",
        "mcp__fx__*",
    ]
    assert narrowed(None, ["mcp__raw__*"]) == ["mcp__raw__*"]
    h = definition(list(parent))
    from mcp_harness.store.agents import AgentRecord

    record = AgentRecord(
        id="a1", account_id="local", definition=h, state_dir=Path("."), status="active", created_at=0, updated_at=0
    )
    child = effective_agent(record, {"tools": ["mcp__fx__echo", "mcp__raw__rpc_error", "search"]})
    assert child.definition.tools == ("search", "mcp__fx__echo")


async def test_only_granted_upstream_tools_are_listed_readable_and_callable(client: Client) -> None:
    listing = await call(client, "read", {"address": "~/tools/"})
    upstream = sorted(n for n in listing["tools"] if n.startswith("mcp__"))
    assert upstream == [
        "mcp__fx__echo",
        "mcp__raw__grow",
        "mcp__raw__malformed",
        "mcp__raw__pid",
        "mcp__raw__rpc_error",
    ]
    miss = await call(client, "call", {"tool": "mcp__fx__add", "input": {"a": 1, "b": 2}})
    assert miss["summary"] == "No callable tool named mcp__fx__add. Here is what you can call."
    contract = await call(client, "read", {"address": "~/tools/mcp__fx__add"})
    assert contract["summary"] == "No tool named mcp__fx__add. Here is what you can read and call."
    assert await call(client, "call", {"tool": "mcp__fx__echo", "input": {"text": "granted"}}) == {"result": "granted"}


async def test_a_revoked_grant_takes_effect_at_once(client: Client, granted_harness: Harness) -> None:
    agent = granted_harness.agent()
    try:
        granted_harness.agents.update(agent.id, dataclasses.replace(agent.definition, tools=("mcp__fx__echo",)))
        miss = await call(client, "call", {"tool": "mcp__raw__rpc_error", "input": {}})
        assert miss["summary"] == "No callable tool named mcp__raw__rpc_error. Here is what you can call."
        error = await refused(client, "read", {"address": "mcp://raw/"})
        assert error["code"] == "not-found" and "raw" in error["message"]
    finally:
        granted_harness.agents.update(agent.id, agent.definition)


async def test_an_agent_scoped_token_never_reaches_an_ungranted_server(granted_harness: Harness) -> None:
    other = {**granted_harness.default_definition().to_json(), "name": "other", "tools": ["mcp__fx__*"]}
    granted_harness.agents.create(granted_harness.account_id, normalize_definition(other))
    settings = HttpSettings(tokens=[TokenSettings(hash=token_hash("other-token"), agent="other", label="other")])
    app = http_app(build_server(granted_harness), host="127.0.0.1", http=settings)
    async with serving(app) as base:
        headers = {"Authorization": "Bearer other-token"}
        transport = streamable_http_client(f"{base}/mcp", http_client=httpx2.AsyncClient(headers=headers))
        async with Client(transport, mode="legacy") as c:
            miss = await call(c, "call", {"tool": "mcp__raw__rpc_error", "input": {}})
            assert miss["summary"] == "No callable tool named mcp__raw__rpc_error. Here is what you can call."
            assert "mcp__fx__add" in miss["tools"] and not [n for n in miss["tools"] if n.startswith("mcp__raw__")]
            error = await refused(c, "read", {"address": "mcp://raw/"})
            assert error["code"] == "not-found" and error["message"].endswith("Yours: mcp://fx/.")
