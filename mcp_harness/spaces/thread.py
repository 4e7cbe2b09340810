"""The `thread:` space: the caller's conversations (`thread:`) and one transcript (`thread:<id>`), HARNESS §11.2.

The reading itself is in threads.py, shared with the `run:` space and the CLI's transcript views.
"""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.spaces import threads
from mcp_harness.spaces.space import ResourceForm, Space, markdown_resource
from mcp_harness.verbs.base import VerbContext, VerbResult


def read_threads(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    """The listing takes options (`threads.LISTING_OPTIONS`); a transcript ignores them."""
    if address.listing:
        return threads.list_threads(ctx, options, fmt)
    return threads.read_thread(ctx, address.rest, fmt)


SPACE = Space(
    name="thread",
    kinds=("thread",),
    read=read_threads,
    read_options=threads.LISTING_OPTIONS,
    read_form="thread:, thread:<id>",
    read_line="""- `thread:`: your account's conversations, newest first, in pages (options query, agentId, limit 1-100, cursor); `thread:<id>`: one transcript.""",  # noqa: E501
    read_details="""## `thread:` and `thread:<id>`
- `thread:` lists your account's conversations (a token scoped to one agent: that agent's), newest first: {threads: [{thread, title?, description?, agent, agentId, status, parentThread?, updatedAt, snippet?}], totalThreads?, nextCursor?}. Options: `query` (a case-insensitive substring of a title, a description or any message of the account, found through a full-text index; matches carry a snippet, at most `limit` of them), `agentId` (one agent's conversations), `limit` (an integer from 1 to 100, default 25; any other value is refused), `cursor` (without a query: the `nextCursor` of the page before; the listing counts `totalThreads`). Other option keys are refused.
- `thread:<id>`: the conversation's last 200 events as a transcript (kept to its last 262,144 characters), with its child sessions and the runs behind them; `format: "json"` adds the events themselves. A conversation you may not see reads as not found.""",  # noqa: E501
    resources=(
        ResourceForm(
            "thread",
            "Conversation transcript",
            "thread:{id}",
            "A session's last 200 events, each with its actor.",
            "text/markdown",
        ),
    ),
    resource_read=markdown_resource(read_threads),
)
