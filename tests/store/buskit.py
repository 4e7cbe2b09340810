"""Two replicas' databases and change buses on one PostgreSQL database, and what a failover does to a listener."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp_harness.store.change_bus import ChangeBus, start_change_bus
from mcp_harness.store.pg import PgDatabase


@contextmanager
def two_replicas(url: str) -> Iterator[tuple[PgDatabase, ChangeBus, PgDatabase, ChangeBus]]:
    """Replica A's database and bus, then B's, closed (buses first) when the block ends."""
    a_db, b_db = PgDatabase(url, pool_size=2), PgDatabase(url, pool_size=2)
    a, b = start_change_bus(a_db), start_change_bus(b_db)
    assert a is not None and b is not None
    try:
        yield a_db, a, b_db, b
    finally:
        a.close()
        b.close()
        a_db.close()
        b_db.close()


def drop_listeners(db: PgDatabase) -> int:
    """Terminate every other backend sitting in LISTEN, as a failover or an idle-connection reaper would."""
    with db.reading() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> "
            "pg_backend_pid()"
        ).fetchall()
    return len(rows)
