"""MCP Apps (issue 17 point 3): the `ui://` run view, its link from delegate and plan, and what the view reads."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.server import apps as sdk_apps
from mcp.shared.exceptions import MCPError

from mcp_harness.harness import Harness
from mcp_harness.server import apps, build_server
from tests.conftest import call

pytestmark = pytest.mark.anyio

RULES: list[dict[str, Any]] = [
    {
        "when": "Coordinate two",
        "turns": [
            {"toolCalls": [{"name": "delegate", "input": {"brief": f"Leaf {i}"}} for i in range(2)]},
            {"text": "both came back"},
        ],
    },
    {"turns": [{"text": "leaf done"}]},
]


class AppsHost(ClientExtension):
    """A client that renders MCP Apps: it declares the extension with the app MIME type."""

    identifier = sdk_apps.EXTENSION_ID

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [sdk_apps.APP_MIME_TYPE]}


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    return RULES


@pytest.fixture(params=["legacy", "2026-07-28"])
async def client(request: pytest.FixtureRequest, scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode=request.param, extensions=[AppsHost()]) as c:
        yield c


def _view_link(result: types.CallToolResult) -> dict[str, Any]:
    """The result's `_meta` without the 2026-07-28 era's own `serverInfo` stamp."""
    return {k: v for k, v in (result.meta or {}).items() if not k.startswith("io.modelcontextprotocol/")}


def test_the_constants_are_the_sdks() -> None:
    assert (apps.EXTENSION_ID, apps.APP_MIME_TYPE) == (sdk_apps.EXTENSION_ID, sdk_apps.APP_MIME_TYPE)
    empty = sdk_apps.ResourceCsp(connect_domains=[], resource_domains=[], frame_domains=[], base_uri_domains=[])
    assert apps.CSP == empty.model_dump(by_alias=True, exclude_none=True)


async def test_delegate_and_plan_name_the_view(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("delegate", "plan"):
        assert tools[name].meta == {"ui": {"resourceUri": apps.VIEW_URI}}
    assert all(t.meta is None for n, t in tools.items() if n not in ("delegate", "plan"))


def test_the_server_declares_the_extension_as_the_sdk_does(scripted: Harness) -> None:
    """`capabilities.extensions[id] = {}`, as `MCPServer(extensions=[Apps()])` advertises it (the handshake-era wire
    has no `extensions` field: there a host goes by the tools' `_meta`)."""
    server = build_server(scripted)
    for era in (None, "2026-07-28"):
        extensions = server.get_capabilities(protocol_version=era).extensions or {}
        assert extensions[apps.EXTENSION_ID] == sdk_apps.Apps().settings() == {}


async def test_the_view_is_listed_and_read_with_its_csp_and_loads_nothing_external(client: Client) -> None:
    listed = [r for r in (await client.list_resources()).resources if r.uri == apps.VIEW_URI]
    assert len(listed) == 1 and listed[0].mime_type == "text/html;profile=mcp-app"
    assert listed[0].meta == {"ui": {"csp": apps.CSP, "prefersBorder": True}}
    content = (await client.read_resource(apps.VIEW_URI)).contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.mime_type == "text/html;profile=mcp-app" and content.meta == listed[0].meta
    html = content.text
    assert html.startswith("<!DOCTYPE html>") and "ui/initialize" in html and "ui/notifications/tool-result" in html
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert "http://" not in html and "https://" not in html, "the view names no origin at all"
    assert '<meta http-equiv="Content-Security-Policy"' in html and "connect-src 'none'" in html


async def test_plan_keeps_its_text_and_links_the_view(client: Client) -> None:
    steps = [{"id": "a", "label": "Look", "status": "done"}, {"id": "b", "label": "Fix", "status": "running"}]
    result = await client.call_tool("plan", {"title": "Repairs", "steps": steps})
    assert not result.is_error
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert text.text.startswith("Plan saved (2 steps).") and "[~] b · Fix · running" in text.text
    assert _view_link(result) == {"ui": {"resourceUri": apps.VIEW_URI}, apps.VIEW_META_KEY: {"tool": "plan"}}
    # What the view reads to stay current: the plan as JSON, through the host's resources/read.
    plan = await client.read_resource("harness://plan?format=json")
    body = plan.contents[0]
    assert isinstance(body, types.TextResourceContents) and body.mime_type == "application/json"
    data = json.loads(body.text)
    assert data["title"] == "Repairs" and [s["status"] for s in data["steps"]] == ["done", "running"]


async def test_delegate_keeps_its_text_links_the_view_and_its_tree_reads_as_json(client: Client) -> None:
    with anyio.fail_after(30):
        result = await client.call_tool("delegate", {"brief": "Coordinate two"})
    assert not result.is_error
    data = result.structured_content
    assert isinstance(data, dict) and data["status"] == "succeeded"
    text = result.content[0]
    assert isinstance(text, types.TextContent) and text.text.startswith("The child succeeded.")
    assert '"text": "both came back"' in text.text, "clients without apps keep the whole answer"
    hint = {"tool": "delegate", "runId": data["runId"]}
    assert _view_link(result) == {"ui": {"resourceUri": apps.VIEW_URI}, apps.VIEW_META_KEY: hint}
    root = (await client.read_resource(f"run:{data['runId']}?format=json")).contents[0]
    assert isinstance(root, types.TextResourceContents) and root.mime_type == "application/json"
    tree = json.loads(root.text)
    assert tree["status"] == "succeeded" and len(tree["children"]) == 2
    leaf = (await client.read_resource(f"run:{tree['children'][0]['id']}?format=json")).contents[0]
    assert isinstance(leaf, types.TextResourceContents) and json.loads(leaf.text)["status"] == "succeeded"
    # The tools/call fallback (hosts that proxy only tools) gives the same record.
    read = await call(client, "read", {"address": f"run:{data['runId']}", "format": "json"})
    assert read["id"] == tree["id"] and len(read["children"]) == 2


async def test_the_json_form_is_only_for_runs_and_the_plan(client: Client) -> None:
    for uri in ("harness://self?format=json", "run:nope?format=json"):
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri)
        assert info.value.error.data == {"uri": uri}
