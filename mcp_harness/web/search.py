"""`web_search` through a SearXNG JSON API (HARNESS §5), fetched by the guarded client."""

from __future__ import annotations

import json
from typing import Any

from mcp_harness.errors import Upstream
from mcp_harness.web.egress import Egress

DEFAULT_COUNT = 10
MAX_COUNT = 25
FALLBACK_ENGINES = ("duckduckgo", "bing", "brave", "mojeek", "wikipedia")
"""Tried once, instead of the instance's defaults, when some engines fail to answer."""


def _query(egress: Egress, base: str, params: dict[str, str]) -> dict[str, Any]:
    url = base.rstrip("/") + "/search"
    with egress.open(url, accept="application/json", params=params) as response:
        if response.status >= 400:
            raise Upstream(f"The search service at {base} answered HTTP {response.status}.")
        body = response.read(egress.settings.max_page_bytes)
    try:
        reply = json.loads(body.data)
    except ValueError:
        raise Upstream(f"The search service at {base} did not return JSON (is format=json enabled?).") from None
    if not isinstance(reply, dict):
        raise Upstream(f"The search service at {base} returned an unexpected reply.")
    return reply  # pyright: ignore[reportUnknownVariableType]


def _failed_engines(reply: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for item in reply.get("unresponsive_engines") or []:
        name = item[0] if isinstance(item, list | tuple) and item else item
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


def _results(reply: dict[str, Any]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for item in reply.get("results") or []:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        out.append(
            {
                "title": str(item.get("title") or item["url"]),
                "url": item["url"],
                "snippet": " ".join(str(item.get("content") or "").split()),
                "engine": str(item.get("engine") or ", ".join(item.get("engines") or [])),
            }
        )
    return out


def web_search(egress: Egress, base: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    """Run one search; with failed engines, retry once on the fallback set and report what stayed partial."""
    query = str(tool_input["query"]).strip()
    count = max(1, min(int(tool_input.get("count") or DEFAULT_COUNT), MAX_COUNT))
    params = {
        "q": query,
        "format": "json",
        "categories": str(tool_input.get("category") or "general"),
        "language": str(tool_input.get("language") or "en"),
    }
    if tool_input.get("timeRange"):
        params["time_range"] = str(tool_input["timeRange"])
    reply = _query(egress, base, params)
    failed = _failed_engines(reply)
    results = _results(reply)
    if failed:
        retry = _query(egress, base, {**params, "engines": ",".join(e for e in FALLBACK_ENGINES if e not in failed)})
        seen = {r["url"] for r in results}
        results += [r for r in _results(retry) if r["url"] not in seen]
        failed += [e for e in _failed_engines(retry) if e not in failed]
    results = results[:count]
    partial = bool(failed)
    summary = f'{len(results)} result{"s" if len(results) != 1 else ""} for "{query}".'
    if partial:
        summary += f" Partial: these engines did not answer: {', '.join(failed)}."
    lines = [
        f"{i}. [{r['title']}]({r['url']})" + (f" — {r['snippet']}" if r["snippet"] else "")
        for i, r in enumerate(results, 1)
    ]
    data: dict[str, Any] = {"summary": summary, "results": results, "partial": partial, "markdown": "\n".join(lines)}
    if partial:
        data["failedEngines"] = failed
    return data
