"""The `search` callable: hypermedia search over Seed documents. Only its contract is in this build.

The contract is served (`read ~/tools/search` by an agent granted it, a stored definition naming it) so that a
definition written for a host with a search engine keeps its meaning; no host of this build offers it
(`callables/registry.py`).
"""

from __future__ import annotations

from mcp_harness.verbs.spec import VerbSpec

SEARCH = VerbSpec(
    name="search",
    title="Search",
    read_only=True,
    open_world=True,
    description="Search Seed hypermedia content: document titles, contacts, and optionally document bodies and comments. Returns ranked results with hm:// URLs you can read.",  # noqa: E501 (prose the model reads, one paragraph a line)
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "The search query. Supports phrases and wildcards.",
            },
            "accountUid": {
                "type": "string",
                "description": "Optional account UID to scope search to a single account.",
            },
            "includeBody": {
                "type": "boolean",
                "description": "Set true to search document bodies and comments in addition to titles and contacts.",
            },
            "contextSize": {
                "type": "integer",
                "minimum": 0,
                "maximum": 512,
                "description": "Optional match context size in runes. Defaults to 48.",
            },
            "searchType": {
                "type": "string",
                "enum": ["keyword", "semantic", "hybrid"],
                "description": "Search ranking mode. Defaults to hybrid.",
            },
            "pageSize": {"type": "integer", "minimum": 1, "description": "Maximum number of results to return."},
        },
        "required": ["query"],
    },
)
