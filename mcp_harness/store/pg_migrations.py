"""The migrations of `store/migrations.py`, applied to PostgreSQL: one ordered list, two backends.

Each migration runs as written, through the dialect layer (`PgConnection` translates its DDL and SQL), unless
`store/pg_ddl.py` names it: then its PostgreSQL form runs instead (FTS5 tables, SQLite's table rebuilds). Replicas
starting together serialize on a session advisory lock, so exactly one applies each step and the others find it
recorded; each step commits in its own transaction, as on SQLite.
"""

from __future__ import annotations

import logging
import time

from mcp_harness.errors import StorageError
from mcp_harness.store.migrations import MIGRATIONS
from mcp_harness.store.pg_connection import PgConnection
from mcp_harness.store.pg_ddl import OVERRIDES

logger = logging.getLogger(__name__)

MIGRATION_LOCK = 0x6D63_7068_0002
"""The advisory lock of `migrate` (held for the session of the migrating connection, released at the end)."""


def migrate(conn: PgConnection) -> list[str]:
    """Apply every migration the database lacks; returns the names applied here (none if another replica did)."""
    raw = conn.raw
    raw.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
    try:
        raw.execute(
            "CREATE TABLE IF NOT EXISTS _harness_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)"
        )
        done = {str(row[0]) for row in raw.execute("SELECT name FROM _harness_migrations").fetchall()}
        known = {fn.__name__ for fn in MIGRATIONS}
        unknown = sorted(done - known)
        if unknown:
            raise StorageError(
                f"The database has migrations this version does not know ({', '.join(unknown)}): it was written by a "
                "newer mcp-harness. Upgrade mcp-harness or point [store] url elsewhere."
            )
        applied: list[str] = []
        for fn in MIGRATIONS:
            name = fn.__name__
            if name in done:
                continue
            with raw.transaction():
                override = OVERRIDES.get(name)
                if override is None:
                    fn(conn)  # pyright: ignore[reportArgumentType]  (PgConnection is the sqlite3 subset migrations use)
                else:
                    override(conn)
                raw.execute(
                    "INSERT INTO _harness_migrations (name, applied_at) VALUES (%s, %s)",
                    (name, int(time.time() * 1000)),
                )
            applied.append(name)
        if applied:
            logger.info("migrated the PostgreSQL database: %s", ", ".join(applied))
        return applied
    finally:
        raw.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


__all__ = ["MIGRATION_LOCK", "migrate"]
