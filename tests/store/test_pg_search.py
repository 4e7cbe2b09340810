"""Thread search (store/search.py) gives the same answers on both backends: FTS5 trigram on SQLite, pg_trgm there."""

from __future__ import annotations

from pathlib import Path

from mcp_harness.definition import AgentDefinition
from mcp_harness.store import search
from mcp_harness.store.agents import AgentStore
from mcp_harness.store.db import Database
from mcp_harness.store.sessions import SessionStore
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)


def test_titles_and_messages_are_found_by_case_insensitive_substring(any_db: Database, tmp_path: Path) -> None:
    agents = AgentStore(any_db, tmp_path)
    agents.ensure_account("acct", "owner")
    agent_id = agents.create(
        "acct", AgentDefinition(name="a", system_prompt="s", model_provider="scripted", model="scripted")
    ).id
    store = SessionStore(any_db)
    titled = store.create("acct", agent_id, title="Quarterly Report draft")
    talked = store.create("acct", agent_id, title="chat")
    store.append(talked.id, {"type": "message", "role": "user", "content": "where is the 100% discount_code?"}, "user")
    other = store.create("acct", agent_id, title="nothing here")
    store.append(other.id, {"type": "message", "role": "user", "content": "100 percent, discountXcode"}, "user")

    found = store.search("acct", "REPORT", agent_id=None, limit=10)
    assert [s.id for s, _ in found] == [titled.id]
    # `%` and `_` are the user's characters, not wildcards: only the literal text matches.
    hits = store.search("acct", "100% discount_code", agent_id=None, limit=10)
    assert [(s.id, snippet) for s, snippet in hits] == [(talked.id, "where is the 100% discount_code?")]
    # Shorter than a trigram: the bounded scan of the newest rows, on both.
    assert {s.id for s, _ in store.search("acct", "ch", agent_id=None, limit=10)} == {talked.id}
    # A renamed session is found by its new title only (the title triggers, PL/pgSQL on PostgreSQL).
    with any_db.transaction() as conn:
        conn.execute("UPDATE sessions SET title = ? WHERE id = ?", ("Annual summary", titled.id))
    assert store.search("acct", "report", agent_id=None, limit=10) == []
    assert [s.id for s, _ in store.search("acct", "annual", agent_id=None, limit=10)] == [titled.id]


def test_staged_rows_reach_the_index_with_their_commit(any_db: Database, tmp_path: Path) -> None:
    agents = AgentStore(any_db, tmp_path)
    agents.ensure_account("acct", "owner")
    agent_id = agents.create(
        "acct", AgentDefinition(name="a", system_prompt="s", model_provider="scripted", model="scripted")
    ).id
    store = SessionStore(any_db)
    session = store.create("acct", agent_id, title="t")
    with any_db.transaction() as conn, search.staged(conn):
        store.append_within(conn, session.id, {"type": "message", "role": "agent", "content": "staged needle"}, "agent")
        assert search.message_matches(conn, "acct", "needle", None, 5) == {session.id: "staged needle"}
    assert [s.id for s, _ in store.search("acct", "needle", agent_id=None, limit=5)] == [session.id]
