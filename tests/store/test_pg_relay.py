"""The one listening loop on PostgreSQL (`pg_notify.Relay`): a connection the server drops is reopened, its consumer
is told it may have missed something, and notifications are heard again — for the run engine's wake-ups and the
change bus alike."""

from __future__ import annotations

import threading

from mcp_harness.store.pg import PgDatabase
from mcp_harness.store.pg_notify import Relay
from tests.store.buskit import drop_listeners, two_replicas
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def test_a_relay_reopens_a_dropped_connection_and_hears_again(pg_cluster: Cluster) -> None:
    db = PgDatabase(pg_cluster.new_database(migrated=True), pool_size=2)
    heard: list[str] = []
    got, connected = threading.Semaphore(0), threading.Semaphore(0)

    def hear(batch: list[tuple[str, str]]) -> None:
        heard.extend(payload for _, payload in batch)
        got.release()

    relay = Relay(lambda: db.listen("harness_test"), hear, on_connect=connected.release)
    try:
        assert connected.acquire(timeout=10)
        db.notify("harness_test", "before")
        assert got.acquire(timeout=10)
        assert drop_listeners(db) == 1
        assert connected.acquire(timeout=15)  # reopened (and the consumer told it was deaf for a while)
        db.notify("harness_test", "after")
        assert got.acquire(timeout=10)
        assert heard == ["before", "after"]
    finally:
        relay.stop(join=True)
        db.close()


def test_the_change_bus_rides_the_same_loop_across_a_dropped_connection(pg_cluster: Cluster) -> None:
    woke = threading.Semaphore(0)
    with two_replicas(pg_cluster.new_database(migrated=True)) as (a_db, a, b_db, _):
        a.on_change(woke.release)
        assert woke.acquire(timeout=10)  # listening: one look for what came before
        assert drop_listeners(a_db) == 1
        assert woke.acquire(timeout=15)  # reopened: one look for what came while deaf
        with b_db.transaction() as conn:
            conn.execute("INSERT INTO accounts (id, name, created_at) VALUES ('after', 'n', 0)")
        assert woke.acquire(timeout=10)
