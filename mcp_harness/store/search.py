"""Thread search as an index: every message of the account and every session title, in SQLite FTS5 (migration m011).

The reference (HARNESS §11.2) matches a lowercased substring against the titles of the 400 newest sessions and the
text of the 4,000 newest messages, so an older conversation can never be found and each search costs a scan. Here the
same matching rule — a case-insensitive substring, the first hit per session with ±80 characters of context — runs
over an FTS5 table with the trigram tokenizer (which answers substring queries from the index), kept by
`SessionStore.append_many` in the append's own transaction. A new session's title is indexed by
`SessionStore.create` (`index_titles`); changed and deleted titles by triggers on `sessions`.

Inside the engine's group commits (`runs/lane.py`) a message's or a new title's index row waits in a temp table and
all of the group's go into the index in one statement just before the commit (`staged`): FTS5 writes a new index
segment at every savepoint that follows a write, and a group is a savepoint per call, so a wide fan-out's replies
would each cost a segment (and the merges after). Titles were indexed by an insert trigger until m023; as it wrote
FTS5 in the middle of a group, every savepoint after a spawn paid that flush, which was about a tenth of the lane's
time in a fan-out (issue 15). Staged rows live in the group's transaction: they roll back with the call
that wrote them and reach the index in the same commit as their events, or not at all.

A query shorter than three characters has no trigram to look up: it falls back to the reference's bounded scan of the
newest sessions and messages, which is what it always was.

On PostgreSQL (docs/postgres.md) the same rule runs on pg_trgm: the tables have a GIN trigram index and the query is
`ILIKE` with the user's text escaped, which the index answers the way FTS5's trigram `MATCH` does; rows are written
directly (no index segments to spare), so `staged` stages nothing there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import cbor2

from mcp_harness.store.batch import insert_rows
from mcp_harness.store.dialect import backend
from mcp_harness.store.port import Connection

SNIPPET_CONTEXT = 80
MIN_INDEXED_QUERY = 3
"""Trigram lookups need three characters; shorter queries scan the newest rows as the reference does."""
RECENT_SESSIONS = 400
RECENT_MESSAGES = 4000

SCHEMA = (
    "CREATE VIRTUAL TABLE message_search USING fts5(content, session_id UNINDEXED, tokenize = 'trigram')",
    "CREATE VIRTUAL TABLE title_search USING fts5(text, session_id UNINDEXED, tokenize = 'trigram')",
    "CREATE TRIGGER title_search_insert AFTER INSERT ON sessions BEGIN "
    "INSERT INTO title_search (text, session_id) "
    "VALUES (COALESCE(new.title, '') || char(10) || COALESCE(new.description, ''), new.id); END",
    "CREATE TRIGGER title_search_update AFTER UPDATE OF title, description ON sessions BEGIN "
    "DELETE FROM title_search WHERE session_id = old.id; "
    "INSERT INTO title_search (text, session_id) "
    "VALUES (COALESCE(new.title, '') || char(10) || COALESCE(new.description, ''), new.id); END",
    "CREATE TRIGGER title_search_delete AFTER DELETE ON sessions BEGIN "
    "DELETE FROM title_search WHERE session_id = old.id; DELETE FROM message_search WHERE session_id = old.id; END",
)


def message_text(payload: dict[str, Any]) -> str | None:
    """The searchable text of an event: a `message` event's string content, as the reference searches."""
    if payload.get("type") != "message":
        return None
    content = payload.get("content")
    return content if isinstance(content, str) and content else None


def track(conn: Connection, session_id: str, payloads: Iterable[dict[str, Any]]) -> None:
    """Index the messages among these appended events (inside the append's transaction)."""
    index(conn, rows_of(session_id, payloads))


def rows_of(session_id: str, payloads: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The index rows of these events, for `index`: several sessions' rows go in together (`create_many`)."""
    return [(text, session_id) for p in payloads if (text := message_text(p)) is not None]


def index(conn: Connection, rows: Sequence[tuple[str, str]]) -> None:
    """Index `(text, session_id)` message rows in one statement (`store/batch.py` says why not one per row); inside
    `staged`, into its temp table."""
    _write(conn, "message_search", rows)


def index_titles(conn: Connection, rows: Sequence[tuple[str, str]]) -> None:
    """Index new sessions' `(title, session_id)` rows, as the insert trigger did before m023 (a session is created
    without a description); inside `staged`, into its temp table. PostgreSQL keeps its trigger: nothing to do."""
    if backend(conn) == "sqlite":
        _write(conn, "title_search", [(f"{title}\n", session_id) for title, session_id in rows])


def _write(conn: Connection, table: str, rows: Sequence[tuple[str, str]]) -> None:
    if not rows:
        return
    if conn in _STAGING and backend(conn) == "sqlite":
        insert_rows(
            conn, "INSERT INTO temp.search_staged (tbl, content, session_id) VALUES", f"('{table}', ?, ?)", rows
        )
        _STAGED.setdefault(conn, set()).add(table)
    else:
        insert_rows(conn, f"INSERT INTO {table} ({_COLUMNS[table]}, session_id) VALUES", "(?, ?)", rows)


_STAGING: set[Connection] = set()
"""Connections inside `staged`. One connection serves the process under a lock held for the whole transaction, so
whoever writes on it meanwhile writes inside that transaction."""
_STAGED: dict[Connection, set[str]] = {}
"""Those of them that staged a row, and into which index: a group of run writes that logged no message and created
no session (most of a fan-out's) skips the flush."""
_COLUMNS = {"message_search": "content", "title_search": "text"}


@contextmanager
def staged(conn: Connection) -> Iterator[None]:
    """Inside the caller's open transaction: message and title index rows written meanwhile are staged, then indexed
    in one statement per index when the block ends normally (see the module). On an exception nothing is indexed:
    the transaction is rolling back, staged rows with it."""
    if backend(conn) == "postgres":
        yield
        return
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS search_staged (tbl TEXT NOT NULL, content TEXT, session_id TEXT)")
    _STAGING.add(conn)
    _STAGED.pop(conn, None)
    try:
        yield
    except BaseException:
        _STAGING.discard(conn)
        _STAGED.pop(conn, None)
        raise
    _STAGING.discard(conn)
    _flush(conn)


def _flush(conn: Connection) -> None:
    """Index what `conn` staged so far (inside `staged`: a search in the group sees what the group wrote)."""
    tables = _STAGED.pop(conn, None)
    if not tables:
        return
    for table in sorted(tables):
        conn.execute(
            f"INSERT INTO {table} ({_COLUMNS[table]}, session_id) "
            # A session deleted meanwhile took its index rows with it (`title_search_delete`): so do its staged ones.
            "SELECT content, session_id FROM temp.search_staged "
            "WHERE tbl = ? AND session_id IN (SELECT id FROM main.sessions) ORDER BY rowid",
            (table,),
        )
    conn.execute("DELETE FROM temp.search_staged")


def backfill(conn: Connection) -> None:
    """Index what an older database already holds: every session's title and every message event."""
    conn.execute(
        "INSERT INTO title_search (text, session_id) "
        "SELECT COALESCE(title, '') || char(10) || COALESCE(description, ''), id FROM sessions"
    )
    cursor = conn.execute("SELECT session_id, event_cbor FROM session_events WHERE type = 'message'")
    while batch := cursor.fetchmany(1000):
        rows = [(text, r[0]) for r in batch if (text := message_text(cbor2.loads(r[1]))) is not None]
        conn.executemany("INSERT INTO message_search (content, session_id) VALUES (?, ?)", rows)


def snippet(content: str, query: str) -> str | None:
    """±80 characters around the first case-insensitive hit, with `…` where the text was cut (HARNESS §11.2)."""
    at = content.lower().find(query)
    if at < 0:
        return None
    start, end = max(0, at - SNIPPET_CONTEXT), min(len(content), at + len(query) + SNIPPET_CONTEXT)
    return ("…" if start else "") + content[start:end] + ("…" if end < len(content) else "")


def _phrase(query: str) -> str:
    """The query as one FTS5 string: with the trigram tokenizer, a quoted string matches it as a substring."""
    return '"' + query.replace('"', '""') + '"'


def _contains(conn: Connection, table: str, column: str, query: str) -> tuple[str, str]:
    """The condition (and its argument) that `column` of `table` holds `query` as a substring, answered by the
    trigram index of either backend."""
    if backend(conn) == "postgres":
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"{column} ILIKE ? ESCAPE '\\'", f"%{escaped}%"
    return f"{table} MATCH ?", _phrase(query)


def _scope(agent_id: str | None) -> tuple[str, list[Any]]:
    return (" AND s.agent_id = ?", [agent_id]) if agent_id else ("", [])


def title_matches(conn: Connection, account_id: str, query: str, agent_id: str | None, limit: int) -> list[str]:
    """Sessions whose title or description holds `query` (lowercased), newest-updated first."""
    where, args = _scope(agent_id)
    if len(query) < MIN_INDEXED_QUERY:
        rows = conn.execute(
            "SELECT s.id, s.title, s.description FROM sessions s WHERE s.account_id = ?"
            f"{where} ORDER BY s.updated_at DESC, s.id LIMIT ?",
            [account_id, *args, RECENT_SESSIONS],
        ).fetchall()
        hits = [r[0] for r in rows if query in (r[1] or "").lower() or query in (r[2] or "").lower()]
        return hits[:limit]
    _flush(conn)  # as `message_matches`
    condition, pattern = _contains(conn, "title_search", "t.text", query)
    rows = conn.execute(
        "SELECT s.id FROM title_search t JOIN sessions s ON s.id = t.session_id "
        f"WHERE {condition} AND s.account_id = ?{where} ORDER BY s.updated_at DESC, s.id LIMIT ?",
        [pattern, account_id, *args, limit],
    ).fetchall()
    return [str(r[0]) for r in rows]


def message_matches(conn: Connection, account_id: str, query: str, agent_id: str | None, limit: int) -> dict[str, str]:
    """Up to `limit` sessions with a message holding `query`, newest-updated first, each with its snippet."""
    where, args = _scope(agent_id)
    out: dict[str, str] = {}
    _flush(conn)  # a search inside a staged transaction sees what the transaction wrote, as without staging
    if len(query) < MIN_INDEXED_QUERY:
        rows = conn.execute(
            "SELECT e.session_id, e.event_cbor FROM session_events e JOIN sessions s ON s.id = e.session_id "
            f"WHERE s.account_id = ?{where} AND e.type = 'message' ORDER BY e.created_at DESC LIMIT ?",
            [account_id, *args, RECENT_MESSAGES],
        )
        texts = ((str(r[0]), message_text(cbor2.loads(r[1]))) for r in rows)
    else:
        condition, pattern = _contains(conn, "message_search", "m.content", query)
        newest = "m.id" if backend(conn) == "postgres" else "m.rowid"  # insertion order: an identity column there
        rows = conn.execute(
            "SELECT m.session_id, m.content FROM message_search m JOIN sessions s ON s.id = m.session_id "
            f"WHERE {condition} AND s.account_id = ?{where} ORDER BY s.updated_at DESC, {newest} DESC",
            [pattern, account_id, *args],
        )
        texts = ((str(r[0]), str(r[1])) for r in rows)
    for session_id, text in texts:
        if session_id in out or text is None:
            continue
        found = snippet(text, query)
        if found is not None:
            out[session_id] = found
            if len(out) >= limit:
                break
    return out
