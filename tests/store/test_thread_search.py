"""Thread search is an index (store/search.py, m011): the reference's matching rule over every message of the account,
not just the newest 4,000, kept in step with appends and title changes, and built for databases that predate it."""

from __future__ import annotations

import sqlite3

import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.store.search import SNIPPET_CONTEXT
from tests.conftest import call

pytestmark = pytest.mark.anyio


def _say(harness: Harness, session_id: str, text: str) -> None:
    harness.sessions.append(session_id, {"type": "message", "role": "user", "content": text}, "user")


async def test_an_old_conversation_is_found_past_the_newest_4000_messages(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    old = harness.sessions.create(harness.account_id, agent.id, title="Long ago")
    _say(harness, old.id, "the quarterly PELICAN report is due")
    busy = harness.sessions.create(harness.account_id, agent.id, title="Busy")
    harness.sessions.append_many(
        busy.id, [({"type": "message", "role": "user", "content": f"chatter {i}"}, "user") for i in range(4100)]
    )
    found = await call(client, "read", {"address": "thread:", "options": {"query": "pelican"}})
    assert [t["thread"] for t in found["threads"]] == [f"thread:{old.id}"]
    assert found["threads"][0]["snippet"] == "the quarterly PELICAN report is due"


async def test_substring_matching_snippets_and_the_newest_hit_per_session(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    s = harness.sessions.create(harness.account_id, agent.id, title="Notes")
    long = "x" * 200 + " needle in the middle " + "y" * 200
    _say(harness, s.id, "an older needlework message")
    _say(harness, s.id, long)
    found = await call(client, "read", {"address": "thread:", "options": {"query": "NEEDLE"}})
    assert len(found["threads"]) == 1  # one entry per session
    snippet = found["threads"][0]["snippet"]
    at = long.find("needle")
    assert snippet == "…" + long[at - SNIPPET_CONTEXT : at + len("needle") + SNIPPET_CONTEXT] + "…"
    inside_a_word = await call(client, "read", {"address": "thread:", "options": {"query": "eedlewor"}})
    assert inside_a_word["threads"][0]["snippet"] == "an older needlework message"
    # Two characters have no trigram: the reference's scan of the newest rows answers them.
    short = await call(client, "read", {"address": "thread:", "options": {"query": "dd"}})
    assert [t["thread"] for t in short["threads"]] == [f"thread:{s.id}"]
    quoted = await call(client, "read", {"address": "thread:", "options": {"query": 'say "hi" OR x*'}})
    assert quoted["threads"] == []  # FTS syntax in a query is text to match, never an operator


async def test_titles_are_indexed_as_they_change_and_agents_filter(client: Client, harness: Harness) -> None:
    agent = harness.agent()
    s = harness.sessions.create(harness.account_id, agent.id, title="Draft")
    renamed = await call(client, "read", {"address": "thread:", "options": {"query": "roadmap"}})
    assert renamed["threads"] == []
    with harness.db.transaction() as conn:
        conn.execute("UPDATE sessions SET title = ?, description = ? WHERE id = ?", ("Q3 Roadmap", "plans", s.id))
    by_title = await call(client, "read", {"address": "thread:", "options": {"query": "roadmap"}})
    assert [t["thread"] for t in by_title["threads"]] == [f"thread:{s.id}"]
    by_description = await call(client, "read", {"address": "thread:", "options": {"query": "plans"}})
    assert [t["thread"] for t in by_description["threads"]] == [f"thread:{s.id}"]
    elsewhere = await call(client, "read", {"address": "thread:", "options": {"query": "roadmap", "agentId": "nobody"}})
    assert elsewhere["threads"] == []


def test_a_database_from_before_the_index_is_backfilled(harness: Harness) -> None:
    agent = harness.agent()
    s = harness.sessions.create(harness.account_id, agent.id, title="Tax return")
    _say(harness, s.id, "receipts for the ORCHARD purchase")
    settings = harness.settings
    harness.close()
    # Take the database back to before m011: no search tables, no triggers, m011 (and m023, which drops the insert
    # trigger m011 creates) not recorded.
    conn = sqlite3.connect(settings.data_dir / "harness.db", isolation_level=None)
    for trigger in ("title_search_update", "title_search_delete"):
        conn.execute(f"DROP TRIGGER {trigger}")
    for table in ("message_search", "title_search"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM _harness_migrations WHERE name IN ('m011_thread_search', 'm023_titles_indexed_by_code')")
    conn.close()
    reopened = Harness(settings)  # migrates: m011 builds and fills the index from what is stored
    try:
        by_text = reopened.sessions.search(reopened.account_id, "orchard", agent_id=None, limit=10)
        assert [(r.id, snippet) for r, snippet in by_text] == [(s.id, "receipts for the ORCHARD purchase")]
        by_title = reopened.sessions.search(reopened.account_id, "tax ret", agent_id=None, limit=10)
        assert [r.id for r, _ in by_title] == [s.id]
        later = reopened.sessions.create(reopened.account_id, agent.id, title="Tax refund")  # indexed once, by code
        with reopened.db.reading() as conn:
            rows = conn.execute("SELECT count(*) FROM title_search WHERE session_id = ?", (later.id,)).fetchone()[0]
            triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'title%'")
            assert rows == 1 and sorted(r[0] for r in triggers) == ["title_search_delete", "title_search_update"]
    finally:
        reopened.close()
