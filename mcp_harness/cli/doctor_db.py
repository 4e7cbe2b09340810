"""`mcp-harness doctor`'s database checks: which backend, its version, the migrations, and (PostgreSQL) lock waits.

Read-only: nothing is created or migrated, so doctor can run against a production database beside the replicas.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from mcp_harness.config import Settings
from mcp_harness.errors import HarnessError

Line = Callable[[bool | None, str, str], None]
MIN_SERVER_VERSION = 150000
"""PostgreSQL 15: `MERGE`-era catalogs and the `pg_stat_activity` columns the checks read."""
STUCK_WAIT_S = 60
"""A lock wait longer than this is a failure: a writer holds the store's lock and does not let go."""


def database_checks(settings: Settings, line: Line) -> None:
    """Append the database's checks through `line(ok, label, detail)`."""
    from mcp_harness.store.open import schema_state

    try:
        state = schema_state(settings)
    except HarnessError as exc:
        line(False, "database", exc.message)
        return
    if settings.store.url is None:
        line(True, "database", f"SQLite {sqlite3.sqlite_version} at {state.where}")
    elif not _postgres_checks(settings.store.url, state.where, line):
        return
    if state.unknown:
        line(
            False,
            "migrations",
            f"the store has steps this version does not know ({', '.join(state.unknown)}): "
            "it was written by a newer mcp-harness; upgrade",
        )
    elif not state.applied:
        line(
            None,
            "migrations",
            "none applied yet: the store is created and migrated on first use (or `mcp-harness migrate`)",
        )
    elif state.pending:
        line(
            None,
            "migrations",
            f"{len(state.applied)} applied, {len(state.pending)} pending (from {state.pending[0]}): "
            "`mcp-harness migrate` applies them (serve does at start)",
        )
    else:
        line(True, "migrations", f"{len(state.applied)} applied; up to date")


def _postgres_checks(url: str, where: str, line: Line) -> bool:
    """The server's version and the lock waits on this database; False when it cannot be asked."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as raw:
            version = raw.execute("SELECT current_setting('server_version_num')::int, version()").fetchone()
            waits = raw.execute(
                "SELECT count(*), coalesce(extract(epoch FROM max(now() - a.state_change)), 0) "
                "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE NOT l.granted AND a.datname = current_database()"
            ).fetchone()
    except psycopg.Error as exc:
        line(False, "database", f"PostgreSQL at {where} does not answer: {str(exc).strip()}")
        return False
    assert version is not None and waits is not None
    number, text = int(version[0]), str(version[1]).split(" on ")[0]
    if number < MIN_SERVER_VERSION:
        line(False, "database", f"{text} at {where}; mcp-harness needs PostgreSQL 15 or newer")
        return False
    line(True, "database", f"{text} at {where}")
    count, longest = int(waits[0]), float(waits[1])
    if count == 0:
        line(True, "lock waits", "no session is waiting for a lock")
    else:
        detail = f"{count} waiting for a lock, the longest for {longest:.0f} s"
        if longest > STUCK_WAIT_S:
            line(False, "lock waits", f"{detail}: a writer holds on; see pg_stat_activity for its query")
        else:
            line(None, "lock waits", detail)
    return True


__all__ = ["database_checks"]
