"""The message index inside a group of run writes (`search.staged`, the store lane's transaction): what was staged is
indexed when the group commits, nothing when it fails, and a group that logged no message skips the flush."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_harness.store import search
from mcp_harness.store.db import Database
from mcp_harness.store.sessions import SessionStore


def _database(tmp_path: Path) -> Database:
    """A database with account `a` and its agent `agent`."""
    db = Database(tmp_path / "h.db")
    with db.transaction() as conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES ('a', 'n', 0)")
        conn.execute(
            "INSERT INTO agents (id, account_id, name, definition_cbor, state_dir, created_at, updated_at) "
            "VALUES ('agent', 'a', 'a', x'a0', '/nowhere', 0, 0)"
        )
    return db


def _found(db: Database, word: str) -> int:
    with db.reading() as conn:
        return conn.execute("SELECT count(*) FROM message_search WHERE message_search MATCH ?", (word,)).fetchone()[0]


def test_staged_rows_are_indexed_at_the_end_of_the_group_and_a_failed_group_indexes_none(tmp_path: Path) -> None:
    db = _database(tmp_path)
    session = SessionStore(db).create("a", "agent")
    with db.transaction() as conn, search.staged(conn):
        search.index(conn, [("the kept needle", session.id)])
        assert _found(db, "kept") == 0  # staged, not yet indexed
    assert _found(db, "kept") == 1
    with pytest.raises(RuntimeError), db.transaction() as conn, search.staged(conn):
        search.index(conn, [("the lost needle", session.id)])
        raise RuntimeError("the group failed")
    assert _found(db, "lost") == 0
    statements: list[str] = []
    db._conn.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]
    with db.transaction() as conn, search.staged(conn):
        conn.execute("SELECT 1")
    db._conn.set_trace_callback(None)  # pyright: ignore[reportPrivateUsage]
    assert not any("search_staged" in s and "CREATE" not in s for s in statements)
    db.close()


def _titled(db: Database, word: str) -> int:
    with db.reading() as conn:
        return conn.execute("SELECT count(*) FROM title_search WHERE title_search MATCH ?", (word,)).fetchone()[0]


def test_titles_of_sessions_created_in_a_group_are_staged_found_by_a_search_in_it_and_rolled_back_with_it(
    tmp_path: Path,
) -> None:
    db = _database(tmp_path)
    sessions = SessionStore(db)
    alone = sessions.create("a", "agent", title="Walrus census")  # outside a group: indexed at once
    assert _titled(db, "walrus") == 1
    with db.transaction() as conn, search.staged(conn):
        kept = sessions.create("a", "agent", title="Narwhal census")
        assert _titled(db, "narwhal") == 0  # staged, not yet indexed
        found = sessions.search("a", "narwhal", agent_id=None, limit=5)  # a search in the group sees it
        assert [s.id for s, _ in found] == [kept.id]
        sessions.create("a", "agent", title="Beluga census")
    assert (_titled(db, "narwhal"), _titled(db, "beluga")) == (1, 1)  # each once: the search's flush emptied the stage
    with pytest.raises(RuntimeError), db.transaction() as conn, search.staged(conn):
        sessions.create("a", "agent", title="Dugong census")
        raise RuntimeError("the group failed")
    assert _titled(db, "dugong") == 0
    assert [s.id for s, _ in sessions.search("a", "walrus", agent_id=None, limit=5)] == [alone.id]
    db.close()
