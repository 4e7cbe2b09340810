"""The callables registry is the one declaration of the builtins: what it says a host offers, and which grant each
needs, is what an agent's `~/tools/`, `~/self` and `call` show on that host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from mcp_harness.callables.registry import BUILTINS, CALLABLES
from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.grants import CAPABILITIES
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[True, False], ids=["sandbox", "no-sandbox"])
def has_sandbox(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> bool:
    if not request.param:
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bubblewrap on this host
    return request.param


@pytest.fixture(params=[True, False], ids=["searxng", "no-searxng"])
def host(request: pytest.FixtureRequest, has_sandbox: bool, tmp_path: Path) -> Iterator[Harness]:
    web = {"searxng_url": "http://127.0.0.1:9/"} if request.param else {}
    h = Harness(load_settings(data_dir=tmp_path / "data", web=web))
    if has_sandbox and not h.sandbox_runtimes():
        h.close()
        pytest.skip("this machine has no working sandbox")
    yield h
    h.close()


def test_builtins_are_listed_in_contract_order_with_their_grants() -> None:
    assert [tool.name for tool in BUILTINS] == list(CALLABLES) == ["search", "web_search", "execute"]
    assert [tool.grant for tool in BUILTINS] == ["search", "web_search", "execute"]
    assert CAPABILITIES == ("search", "web_search", "execute", "publish")
    assert all(tool.handler is not None for tool in BUILTINS), "every builtin has an engine"


async def test_what_the_registry_offers_is_what_tools_and_self_show(host: Harness) -> None:
    searxng = bool(host.settings.web.searxng_url)
    sandbox = bool(host.sandbox_runtimes())
    offered = [tool.name for tool in BUILTINS if tool.available(host)]
    assert offered == [name for name, on in (("search", True), ("web_search", searxng), ("execute", sandbox)) if on]
    assert host.offered_callables() == frozenset(offered)
    async with Client(build_server(host)) as c:  # the default agent is granted everything
        listing = await call(c, "read", {"address": "~/tools/"})
        me = await call(c, "read", {"address": "~/self"})
    assert sorted(listing["tools"]) == sorted(offered)  # the listing is by name; grants keep registry order
    assert me["grants"]["callableTools"] == offered
    reasons = {u["tool"]: u["reason"] for u in me.get("unavailableGrants", [])}
    assert reasons == {tool.name: tool.reason_unavailable(host) for tool in BUILTINS if tool.name not in offered}


async def test_each_builtin_is_reached_by_its_own_grant(host: Harness) -> None:
    agent = host.agent()
    for tool in BUILTINS:
        host.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "tools": [tool.grant]}))
        async with Client(build_server(host)) as c:
            listing = await call(c, "read", {"address": "~/tools/"})
            answer = await call(c, "call", {"tool": tool.name, "input": {}})
        here = tool.available(host)
        assert listing["tools"] == ([tool.name] if here else []), tool.name
        # Offered and granted: an empty input gets the contract back; otherwise the name reads as unknown.
        expected = f"Input for {tool.name} did not match" if here else f"No callable tool named {tool.name}."
        assert answer["summary"].startswith(expected), tool.name
