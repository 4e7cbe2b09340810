"""The `web_search` callable: the public web through a SearXNG instance (`[web] searxng_url`, HARNESS §5)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from mcp_harness.errors import BadRequest
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.spec import VerbSpec

WEB_SEARCH = VerbSpec(
    name="web_search",
    title="Web Search",
    read_only=True,
    open_world=True,
    description="Search the public web. Returns ranked results with titles, URLs, and snippets; read a result with `read` on its URL. Use the news category for recent events.",  # noqa: E501 (prose the model reads, one paragraph a line)
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "The web search query."},
            "count": {
                "type": "integer",
                "minimum": 1,
                "description": "Maximum number of results to return. Default 10, max 25.",
            },
            "category": {
                "type": "string",
                "enum": ["general", "news"],
                "description": "Result category. Use news for recent events, general otherwise. Defaults to general.",
            },
            "timeRange": {
                "type": "string",
                "enum": ["day", "week", "month", "year"],
                "description": "Optional recency filter for time-sensitive queries.",
            },
            "language": {"type": "string", "description": "Optional language code such as en. Defaults to en."},
        },
        "required": ["query"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description": "One-line summary of the search outcome."},
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "url": {"type": "string"},
                        "snippet": {"type": "string"},
                        "engine": {"type": "string", "description": "Upstream engine that produced the result."},
                    },
                },
            },
            "partial": {
                "type": "boolean",
                "description": "True when some engines were unavailable and coverage may be partial.",
            },
            "markdown": {"type": "string", "description": "Human-readable rendering of the results."},
        },
    },
)


async def web_search(ctx: VerbContext, tool_input: dict[str, Any]) -> VerbResult:
    """Run one search on the configured instance, on a worker thread (the guarded client blocks)."""
    base = ctx.services.settings.web.searxng_url
    if not base:  # offered only with a URL, so only a config reloaded under a running call gets here
        raise BadRequest("Tool web_search has no executor in this runtime.")
    # Imported here: the guarded client pulls in the HTTP stack, which start-up does not pay for.
    from mcp_harness.web.search import web_search as search_the_web

    data = await anyio.to_thread.run_sync(search_the_web, ctx.services.web, base, tool_input)
    return VerbResult.of(data, data["markdown"] or None)
