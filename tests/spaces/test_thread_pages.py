"""`thread:` is a page (issue 15): newest first, `limit` at a time, `totalThreads`, and a `nextCursor` while more
remain — one index range per page, ties in `updatedAt` broken by id, so no conversation is skipped or repeated."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_harness.harness import Harness
from tests.conftest import call, refused

pytestmark = pytest.mark.anyio


async def test_cursors_walk_every_conversation_once_newest_first(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    made = [harness.sessions.create(harness.account_id, agent.id, title=f"T{i}") for i in range(7)]
    with harness.db.transaction() as conn:  # three share one timestamp: the id breaks the tie
        conn.executemany("UPDATE sessions SET updated_at = 1000 WHERE id = ?", [(s.id,) for s in made[:3]])
    await call(client, "write", {"address": "~/memory/a.txt", "content": "x"})  # this session: the newest
    everything = await call(client, "read", {"address": "thread:", "options": {"limit": 100}})
    assert everything["totalThreads"] == 8 and "nextCursor" not in everything
    expected = [t["thread"] for t in everything["threads"]]
    seen: list[str] = []
    cursor = None
    while True:
        page = await call(
            client, "read", {"address": "thread:", "options": {"limit": 3, **({"cursor": cursor} if cursor else {})}}
        )
        assert page["totalThreads"] == 8
        seen += [t["thread"] for t in page["threads"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
        assert len(page["threads"]) == 3 and "pass options.cursor for the next page" in page["summary"]
    assert seen == expected and len(set(seen)) == 8


async def test_cursor_refusals_name_what_is_accepted(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    for i in range(3):
        harness.sessions.create(harness.account_id, agent.id, title=f"T{i}")
    page = await call(client, "read", {"address": "thread:", "options": {"limit": 1}})
    with_query = await refused(
        client, "read", {"address": "thread:", "options": {"cursor": page["nextCursor"], "query": "T"}}
    )
    assert "cursor pages the listing; a query returns its best matches up to limit" in with_query["message"]
    for junk in ("", "!!", 5, "MTIz"):  # "MTIz" is "123": no id
        error = await refused(client, "read", {"address": "thread:", "options": {"cursor": junk}})
        assert "cursor must be the nextCursor of an earlier page of thread:" in error["message"], junk
    filtered = await call(client, "read", {"address": "thread:", "options": {"agentId": "nobody"}})
    assert filtered["threads"] == [] and filtered["totalThreads"] == 0
