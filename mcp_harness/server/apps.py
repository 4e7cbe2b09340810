"""MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865): one `ui://` view that shows a run tree and a plan live.

`delegate` and `plan` carry `_meta.ui.resourceUri` on their tool definitions (where hosts look before the call) and
on their results (with the run the view should follow). The view (apps_view.html) is self-contained HTML and JS: it
loads nothing, declares a CSP that allows nothing external, and talks only to its host over postMessage JSON-RPC,
refreshing through the host's proxy to this server (resources/read `run:<id>?format=json`, `harness://plan?format=json`
— resources/catalog.py — or `tools/call read` when the host proxies only tools). Results keep their full text for
clients that do not render apps, so the link is all a non-Apps client ever sees of this.

The SDK's `mcp.server.apps.Apps` is an extension for `MCPServer`; this server is the lowlevel `Server` with its own
tool list, so it declares the same things by hand: the constants below equal the SDK's (a test pins them), kept
here so that listing tools does not import the SDK's server composition layer on a stdio cold start.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import mcp_types as types

EXTENSION_ID = "io.modelcontextprotocol/ui"
"""The MCP Apps extension id (`mcp.server.apps.EXTENSION_ID`), advertised under `capabilities.extensions`."""
APP_MIME_TYPE = "text/html;profile=mcp-app"
"""The MIME type hosts render a `ui://` resource under (`mcp.server.apps.APP_MIME_TYPE`); no other."""
VIEW_URI = "ui://mcp-harness/run-view.html"
VIEWED_VERBS = frozenset({"delegate", "plan"})
VIEW_META_KEY = "mcp-harness/view"
"""A result's own hint to the view: which verb answered and the run to follow (also in structuredContent, which a
large result may trim)."""

CSP: dict[str, list[str]] = {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}
"""`_meta.ui.csp` (`mcp.server.apps.ResourceCsp` by alias): every list empty, so the host allows no origin at all —
no fetch, no script, style, image or frame from anywhere; the view only posts messages to its host."""
UI_RESOURCE_META: dict[str, Any] = {"ui": {"csp": CSP, "prefersBorder": True}}


def tool_meta(name: str) -> dict[str, Any] | None:
    """A tool definition's `_meta`: the view's link for delegate and plan, nothing for the other tools."""
    return {"ui": {"resourceUri": VIEW_URI}} if name in VIEWED_VERBS else None


def result_meta(verb: str, data: dict[str, Any], meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """A delegate or plan result's `_meta`: what the verb set, plus the view's link and the run it shows."""
    if verb not in VIEWED_VERBS:
        return meta
    hint: dict[str, Any] = {"tool": verb}
    if isinstance(data.get("runId"), str):
        hint["runId"] = data["runId"]
    return {**(meta or {}), "ui": {"resourceUri": VIEW_URI}, VIEW_META_KEY: hint}


@cache
def view_html() -> str:
    return resources.files("mcp_harness.server").joinpath("apps_view.html").read_text(encoding="utf-8")


def view_resource() -> types.Resource:
    """The view as resources/list shows it, its CSP there too so a host can review it before any call."""
    return types.Resource(
        name="run-view",
        title="Run tree and plan (MCP Apps view)",
        uri=VIEW_URI,
        description="A live view of a delegated run tree and this session's plan, for hosts that render MCP Apps.",
        mime_type=APP_MIME_TYPE,
        _meta=UI_RESOURCE_META,
    )


def read_view() -> types.ReadResourceResult:
    """The view's HTML, `_meta.ui` on the content item (where hosts look first)."""
    content = types.TextResourceContents(
        uri=VIEW_URI, mime_type=APP_MIME_TYPE, text=view_html(), _meta=UI_RESOURCE_META
    )
    return types.ReadResourceResult(contents=[content])
