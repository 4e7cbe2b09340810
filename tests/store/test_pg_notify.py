"""Wake-up hints between replicas: a notification reaches a listening replica when its transaction commits, never
when it rolls back, and a malformed channel is refused by name."""

from __future__ import annotations

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.store.pg import PgDatabase
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def test_a_hint_is_sent_at_commit_and_never_for_a_rollback(pg_cluster: Cluster) -> None:
    url = pg_cluster.new_database(migrated=True)
    sender, receiver = PgDatabase(url, pool_size=2), PgDatabase(url, pool_size=2)
    listener = receiver.listen("harness_runs", "harness_changes")
    try:
        with pytest.raises(RuntimeError), sender.transaction():
            sender.notify("harness_runs", "rolled back")
            raise RuntimeError("the enqueue fails")
        with sender.transaction() as conn:
            conn.execute("INSERT INTO accounts (id, name, created_at) VALUES ('a', 'n', 0)")
            sender.notify("harness_runs", "agent")
            sender.notify("harness_changes", "harness://plan")
        sender.notify("harness_runs", "outside a transaction")
        got: list[tuple[str, str]] = []
        for _ in range(3):  # each wait returns what has arrived; three cover one hint per wait at worst
            if len(got) < 3:
                got += listener.wait(10.0)
        assert got == [
            ("harness_runs", "agent"),
            ("harness_changes", "harness://plan"),
            ("harness_runs", "outside a transaction"),
        ]
    finally:
        listener.close()
        sender.close()
        receiver.close()


def test_channels_and_payloads_are_checked(pg_cluster: Cluster) -> None:
    db = PgDatabase(pg_cluster.new_database(migrated=True), pool_size=1)
    try:
        with pytest.raises(BadRequest, match="not a harness channel"):
            db.notify("runs; DROP TABLE runs")
        with pytest.raises(BadRequest, match="at most 7900 bytes"):
            db.notify("harness_runs", "x" * 8000)
    finally:
        db.close()
