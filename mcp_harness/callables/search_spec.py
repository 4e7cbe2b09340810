"""The `search` callable's contract, apart from its engine (callables/search.py): the registry lists every builtin's
contract at start-up, and the engine's stores and indexes load only when a search runs."""

from __future__ import annotations

from mcp_harness.verbs.spec import VerbSpec

DEFAULT_CONTEXT = 48
MAX_PAGE = 50
MAX_SEMANTIC_CANDIDATES = 2000
MAX_EMBEDDED_PER_SEARCH = 256
SCOPES = ("hypermedia", "memory", "all")

SEARCH = VerbSpec(
    name="search",
    title="Search",
    read_only=True,
    open_world=True,
    # The reference's description, then what this engine adds (a builtin's document carries only the description).
    description="""Search Seed hypermedia content: document titles, contacts, and optionally document bodies and comments. Returns ranked results with hm:// URLs you can read.

Every word must match (the last one as a prefix); `"a phrase"` matches words in order, `word*` is a prefix. Titles and profiles rank first, then body matches by relevance (bm25). A block match's URL is a block ref `hm://<account>/<path>?v=<version>&l#<block>` of the current version; a comment's is `hm://<author>/<tsid>`; a memory file's is `~/memory/<path>` with the line of the match. Each result carries a snippet of `contextSize` characters around the first match.

`scope`: `hypermedia` (default) searches the node's documents, profiles and comments; `memory` searches only your memory files (names and text); `all` searches both. `accountUid` narrows hypermedia results to one account (a document's space, a comment's author, a profile).

`searchType` `semantic` and `hybrid` embed the query and the content through the provider set as `[search] embeddings_provider` / `embeddings_model` in the config; without one they are refused, and a search that names no searchType is keyword. Semantic search compares the newest 2,000 items in scope and embeds at most 256 new ones per search; `partial: true` says the rest were not compared yet (search again).""",  # noqa: E501
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
                "description": "Search ranking mode. Defaults to hybrid (keyword when no embeddings model is set).",
            },
            "pageSize": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PAGE,
                "description": "Maximum number of results to return. Default 20 (30 for a query under 3 characters).",
            },
            "scope": {
                "type": "string",
                "enum": list(SCOPES),
                "description": "What to search: hypermedia (default), memory (your memory files), or all (both).",
            },
        },
        "required": ["query"],
    },
)
