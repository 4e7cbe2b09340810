"""Both backends meet the store port (`store/port.py`): pyright checks the assignments, the test uses them."""

from __future__ import annotations

from pathlib import Path

from mcp_harness.store.db import Database
from mcp_harness.store.pg import PgDatabase
from mcp_harness.store.port import Store
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def names(store: Store) -> list[str]:
    with store.transaction() as conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)", ("a", "n", 0))
    with store.reading() as conn:
        return [row["name"] for row in conn.execute("SELECT name FROM accounts")]


def test_sqlite_and_postgresql_are_both_a_store(tmp_path: Path, pg_cluster: Cluster) -> None:
    stores: list[Store] = [Database(tmp_path / "h.db"), PgDatabase(pg_cluster.new_database(migrated=True))]
    try:
        assert [names(store) for store in stores] == [["n"], ["n"]]
    finally:
        for store in stores:
            store.close()
