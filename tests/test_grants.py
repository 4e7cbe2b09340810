"""The grant matrix (HARNESS §5): each grant set against each gated operation this build has."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from mcp_harness.definition import normalize_definition
from mcp_harness.grants import CAPABILITIES, may
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call

pytestmark = pytest.mark.anyio

# tools → (execute granted, publish granted). search is usable wherever it is granted (`_searches`); web_search
# needs a SearXNG instance, which these hosts lack.
GRANT_SETS: list[tuple[list[str] | None, bool, bool]] = [
    (None, True, True),  # unset grants everything
    ([], False, False),
    (["execute"], True, False),
    (["execute_code"], True, False),  # the legacy name of execute
    (["search", "web_search"], False, False),
    (["publish"], False, True),
    (["write"], False, True),  # legacy publish names
    (["memory_publish_document"], False, True),
    (["ipfs_write", "execute"], True, True),
    (["read", "call", "delegate"], False, False),  # verbs are never grants
    (["bash", "navigate"], False, False),  # unknown and assistant-only names are inert
]


def _searches(tools: list[str] | None) -> bool:
    return tools is None or "search" in tools


def _callables(tools: list[str] | None, execute: bool) -> list[str]:
    return [name for name, on in (("search", _searches(tools)), ("execute", execute)) if on]


def _with_tools(harness: Harness, tools: list[str] | None) -> None:
    agent = harness.agent()
    raw: dict[str, Any] = {k: v for k, v in agent.definition.to_json().items() if k != "tools"}
    if tools is not None:
        raw["tools"] = tools
    harness.agents.update(agent.id, normalize_definition(raw))


@pytest.mark.parametrize(("tools", "execute", "publish"), GRANT_SETS)
def test_may_answers_for_every_capability(
    harness: Harness, tools: list[str] | None, execute: bool, publish: bool
) -> None:
    _with_tools(harness, tools)
    definition = harness.agent().definition
    expected = {"search": _searches(tools), "web_search": False, "execute": execute, "publish": publish}
    assert {c: may(harness, definition, c) for c in CAPABILITIES} == expected
    assert harness.grants(definition) == {"callableTools": _callables(tools, execute), "publish": publish}


@pytest.mark.parametrize(("tools", "execute", "publish"), GRANT_SETS)
async def test_gated_operations_follow_the_grants(
    harness: Harness, tools: list[str] | None, execute: bool, publish: bool
) -> None:
    async with Client(build_server(harness)) as c:  # author while everything is granted
        source = {"description": "One.", "source": "def main(i):\n    return 1\n", "runtime": "python"}
        await call(c, "write", {"address": "~/tools/one", "content": json.dumps(source)})
    _with_tools(harness, tools)
    async with Client(build_server(harness), mode="legacy") as c:
        me = await call(c, "read", {"address": "~/self"})
        assert me["grants"] == {"callableTools": _callables(tools, execute), "publish": publish}
        listing = await call(c, "read", {"address": "~/tools/"})
        assert listing["tools"] == sorted(["one", *_callables(tools, execute)])
        ran = await call(c, "call", {"tool": "execute", "input": {"runtime": "shell", "code": "echo hi"}})
        assert (ran.get("stdout") == "hi\n") is execute
        assert ran["summary"].startswith("Ran shell code") is execute
        lam = await c.call_tool("call", {"tool": "one"})
        assert lam.is_error is not execute
        if not execute:
            assert lam.structured_content is not None and lam.structured_content["error"]["status"] == 403
        names = [t.name for t in (await c.list_tools()).tools]
        assert ("execute" in names) is execute, "promotion never exceeds the grants"
