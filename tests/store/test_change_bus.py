"""The change bus (PostgreSQL): a replica's listeners hear the other replicas' commits — coalesced, never their own
echo — and a live subscription on replica A is announced a plan change made through replica B."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.shared.subscriptions import ResourceUpdated

from mcp_harness.config import load_settings
from mcp_harness.console import live
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, subscriptions
from mcp_harness.store.change_bus import ChangeBus
from mcp_harness.store.pg import PgDatabase
from tests.conftest import call
from tests.store.buskit import two_replicas
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def _write(db: PgDatabase, account: str) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (?, 'n', 0)", (account,))


def test_a_replica_hears_the_others_commits_and_not_its_own(pg_cluster: Cluster) -> None:
    heard = threading.Semaphore(0)
    with two_replicas(pg_cluster.new_database(migrated=True)) as (a_db, a, b_db, _):
        a.on_change(heard.release)
        assert heard.acquire(timeout=10)  # listening began: one look, for what committed before
        _write(a_db, "own")  # A's own commit: its live views woke through on_every_commit, no echo
        _write(b_db, "other")
        assert heard.acquire(timeout=10)
        assert not heard.acquire(timeout=0.3)  # B's one commit, heard once; A's never


@pytest.mark.anyio
async def test_the_consoles_live_feed_wakes_on_another_replicas_commit(pg_cluster: Cluster) -> None:
    with two_replicas(pg_cluster.new_database(migrated=True)) as (a_db, a, b_db, _):
        feed = live.ChangeFeed(a_db)  # the console's source: with a bus, data_version is read only every 10 s
        try:
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(a.listening.wait, abandon_on_cancel=True)
                seen = await feed.changed(feed.generation, 0.2)  # the bus's first look, if it came meanwhile
                _write(b_db, "other")
                assert await feed.changed(seen, 3600) > seen
        finally:
            feed.stop()


@pytest.mark.anyio
async def test_a_subscription_on_one_replica_hears_a_plan_change_made_through_another(
    tmp_path: Path, pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the bus may deliver it: the rechecks that would otherwise find the change too are pushed out of reach.
    monkeypatch.setattr(subscriptions, "RECHECK_S", 3600.0)
    monkeypatch.setattr(live, "BUS_FALLBACK_S", 3600.0)
    settings = load_settings(
        None, data_dir=tmp_path / "shared", **{"store.url": pg_cluster.new_database(migrated=True)}
    )
    replica_a, replica_b = Harness(settings), Harness(settings)
    try:
        async with Client(build_server(replica_a), mode="2026-07-28") as c:
            steps = [{"id": "s1", "label": "Deploy", "status": "running"}]
            await call(c, "plan", {"steps": steps})
            (session,) = replica_a.sessions.list(replica_a.account_id)
            async with c.listen(resource_subscriptions=["harness://plan"]) as sub:
                bus = ChangeBus.of(replica_a.db)
                assert bus is not None
                with anyio.fail_after(10):  # replica A listens to the others from now on
                    await anyio.to_thread.run_sync(bus.listening.wait, abandon_on_cancel=True)
                plan = replica_b.sessions.get_plan(session.id)
                assert plan is not None
                replica_b.sessions.set_plan(session.id, {**plan, "steps": [{**steps[0], "status": "done"}]})
                with anyio.fail_after(10):
                    assert await sub.__anext__() == ResourceUpdated("harness://plan")
    finally:
        replica_a.close()
        replica_b.close()
