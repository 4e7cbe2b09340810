"""The event log and the script journal as rowid tables (migration m012), and the rebuild that makes them so.

Both were `WITHOUT ROWID` tables holding a CBOR blob per row. Such a table is a B-tree of whole rows, whose leaf
keeps at most ~1,000 bytes of a row on a 4 KiB page: a row just over that (a `write` of 1 KiB, its content in the
`tool_call`) keeps ~500 bytes in the leaf and starts a fresh 4 KiB overflow page for the rest, so 1.1 KB cost 4.8 KB
(measured: ×4.3). A rowid table keeps up to ~4,000 bytes of a row in its leaf and fills overflow pages to the brim
(1.1 KB rows: ×1.3, the indexes included); its `PRIMARY KEY` becomes an index beside it. The blob moves to the last
column, so a scan of the small columns (gc's, by age) never reads a row's overflow pages.
"""

from __future__ import annotations

import sqlite3

SESSION_EVENTS = """
    CREATE TABLE {name} (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        actor TEXT NOT NULL CHECK (actor IN ('user', 'agent', 'system', 'trigger')),
        created_at INTEGER NOT NULL,
        event_cbor BLOB NOT NULL,
        PRIMARY KEY (session_id, seq)
    )
"""

RUN_JOURNAL = """
    CREATE TABLE {name} (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        call_seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        key TEXT,
        created_at INTEGER NOT NULL,
        entry_cbor BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    )
"""


def rebuild(conn: sqlite3.Connection, table: str, create: str) -> None:
    """Rebuild `table` as `create` describes it (`{name}` standing for the table's name; the same columns, in any
    order), keeping its rows and the indexes and triggers declared on it. SQLite's documented procedure for a change
    ALTER TABLE cannot make; nothing references these tables, so foreign keys need no pause. Inside the caller's
    transaction."""
    declared = [
        str(row[0])
        for row in conn.execute(
            "SELECT sql FROM sqlite_schema WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL",
            (table,),
        )
    ]
    columns = ", ".join(str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})"))
    staging = f"{table}_rebuilt"
    conn.execute(create.format(name=staging))
    conn.execute(f"INSERT INTO {staging} ({columns}) SELECT {columns} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE {staging} RENAME TO {table}")
    for statement in declared:
        conn.execute(statement)


def upgrade(conn: sqlite3.Connection) -> None:
    """m012's rebuilds: the event log and the script journal."""
    rebuild(conn, "session_events", SESSION_EVENTS)
    rebuild(conn, "run_journal", RUN_JOURNAL)


__all__ = ["RUN_JOURNAL", "SESSION_EVENTS", "rebuild", "upgrade"]
