"""What the store suites share: a database as an older version left it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcp_harness.store.migrations import MIGRATIONS


def database_before(path: Path, migration: str) -> sqlite3.Connection:
    """A database with every migration before `migration` applied and recorded, one account and one agent in it:
    what a version without that migration left behind, for its backfill to be tested on."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("CREATE TABLE _harness_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    for fn in MIGRATIONS[: [f.__name__ for f in MIGRATIONS].index(migration)]:
        fn(conn)
        conn.execute("INSERT INTO _harness_migrations VALUES (?, 0)", (fn.__name__,))
    conn.execute("INSERT INTO accounts VALUES ('acct', 'owner', 0)")
    conn.execute(
        "INSERT INTO agents (id, account_id, name, definition_cbor, state_dir, created_at, updated_at) "
        "VALUES ('agent', 'acct', 'a', x'a0', '/nowhere', 0, 0)"
    )
    return conn
