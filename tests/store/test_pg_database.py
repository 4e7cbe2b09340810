"""`PgDatabase` keeps `Database`'s transaction semantics (each test runs on both backends), and migrations apply to
PostgreSQL once however many replicas start together."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import anyio
import psycopg
import pytest
from pydantic import ValidationError

from mcp_harness.config import StoreSettings
from mcp_harness.errors import StorageError
from mcp_harness.store.db import Database
from mcp_harness.store.migrations import MIGRATIONS
from mcp_harness.store.pg import PgConnection, PgDatabase
from mcp_harness.store.pg_migrations import migrate
from tests.store.pgkit import Cluster, any_db_fixture, pg_cluster_fixture  # noqa: F401  (fixtures)


def accounts(db: Database) -> list[str]:
    with db.reading() as conn:
        return [row["id"] for row in conn.execute("SELECT id FROM accounts ORDER BY id")]


def add(conn: Any, account_id: str) -> None:
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)", (account_id, "n", 1))


def test_a_transaction_commits_or_rolls_back_whole(any_db: Database) -> None:
    with any_db.transaction() as conn:
        add(conn, "a")
    with pytest.raises(RuntimeError), any_db.transaction() as conn:
        add(conn, "b")
        raise RuntimeError("boom")
    assert accounts(any_db) == ["a"]


def test_a_failed_nested_step_leaves_nothing_and_the_outer_change_goes_on(any_db: Database) -> None:
    with any_db.transaction() as conn:
        add(conn, "outer")
        with pytest.raises(RuntimeError), any_db.transaction() as inner:
            add(inner, "inner")
            raise RuntimeError("inner step fails")
        with any_db.transaction() as inner:
            add(inner, "second")
        # Reads inside the transaction see its own writes, on the same connection.
        assert accounts(any_db) == ["outer", "second"]
    assert accounts(any_db) == ["outer", "second"]


def test_a_joined_step_is_the_callers_transaction_or_its_own(any_db: Database) -> None:
    with pytest.raises(RuntimeError), any_db.transaction() as conn:
        add(conn, "before")
        with any_db.joined() as joined:  # no savepoint: its failure undoes the caller's whole change
            add(joined, "joined")
            raise RuntimeError("the step broke")
    with any_db.transaction() as conn:
        add(conn, "outer")
        with any_db.joined() as joined:
            add(joined, "in")
    with any_db.joined() as conn:  # alone: a transaction of its own
        add(conn, "alone")
    assert accounts(any_db) == ["alone", "in", "outer"]


def test_after_commit_hooks_run_once_committed_and_never_for_what_rolled_back(any_db: Database) -> None:
    ran: list[str] = []
    with any_db.transaction() as conn:
        add(conn, "a")
        any_db.after_commit(lambda: ran.append("outer"))
        with pytest.raises(RuntimeError), any_db.transaction():
            any_db.after_commit(lambda: ran.append("rolled back savepoint"))
            raise RuntimeError("no")
        with any_db.transaction():
            any_db.after_commit(lambda: ran.append("released savepoint"))
        assert ran == []
    assert ran == ["outer", "released savepoint"]
    with pytest.raises(RuntimeError), any_db.transaction():
        any_db.after_commit(lambda: ran.append("rolled back"))
        raise RuntimeError("no")
    any_db.after_commit(lambda: ran.append("outside"))
    assert ran == ["outer", "released savepoint", "outside"]


def test_every_commit_is_announced_until_stopped(any_db: Database) -> None:
    seen: list[int] = []
    stop = any_db.on_every_commit(lambda: seen.append(1))
    with any_db.transaction() as conn:
        add(conn, "a")
    with any_db.transaction() as conn:
        add(conn, "b")
    stop()
    with any_db.transaction() as conn:
        add(conn, "c")
    assert len(seen) == 2


def test_cursors_stay_readable_and_unique_violations_are_sqlites_error(any_db: Database) -> None:
    with any_db.transaction() as conn:
        add(conn, "a")
        add(conn, "b")
        cur = conn.execute("UPDATE accounts SET name = ? WHERE id IN (?, ?)", ("m", "a", "b"))
        rows = conn.execute("SELECT id, name FROM accounts ORDER BY id")
    assert cur.rowcount == 2
    assert [tuple(r) for r in rows] == [("a", "m"), ("b", "m")]
    with pytest.raises(sqlite3.IntegrityError), any_db.transaction() as conn:
        add(conn, "a")
    assert accounts(any_db) == ["a", "b"]


def test_call_runs_off_the_event_loop_and_maps_failures(any_db: Database) -> None:
    def count(db: Database) -> int:
        with db.reading() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM accounts").fetchone()[0])

    assert anyio.run(any_db.call, count) == 0

    def broken(db: Database) -> None:
        with db.reading() as conn:
            conn.execute("SELECT no_such_column FROM accounts")

    with pytest.raises(StorageError, match="no_such_column"):
        any_db.run(broken)


def test_writers_on_postgresql_queue_like_sqlites_so_read_then_write_loses_nothing(pg_cluster: Cluster) -> None:
    db = PgDatabase(pg_cluster.new_database(migrated=True), pool_size=4)
    try:
        with db.transaction() as conn:
            conn.execute("INSERT INTO accounts (id, name, created_at) VALUES ('n', 'counter', 0)")

        def bump() -> None:
            for _ in range(15):
                with db.transaction() as conn:
                    row = conn.execute("SELECT created_at FROM accounts WHERE id = 'n'").fetchone()
                    assert row is not None
                    value = row[0]
                    conn.execute("UPDATE accounts SET created_at = ? WHERE id = 'n'", (value + 1,))

        threads = [threading.Thread(target=bump) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with db.reading() as conn:
            assert tuple(conn.execute("SELECT created_at FROM accounts WHERE id = 'n'").fetchall()) == ((45,),)
    finally:
        db.close()


def test_concurrent_starters_apply_each_migration_exactly_once(pg_cluster: Cluster) -> None:
    url = pg_cluster.new_database()
    barrier = threading.Barrier(3)
    applied: list[list[str]] = []

    def start() -> None:
        with psycopg.connect(url, autocommit=True) as raw:
            barrier.wait()
            applied.append(migrate(PgConnection(raw)))

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = [fn.__name__ for fn in MIGRATIONS]
    assert sorted(n for part in applied for n in part) == sorted(names)
    with psycopg.connect(url, autocommit=True) as raw:
        recorded = [r[0] for r in raw.execute("SELECT name FROM _harness_migrations ORDER BY name")]
        assert recorded == sorted(names)
        assert migrate(PgConnection(raw)) == []


def test_a_database_from_a_newer_version_is_refused(pg_cluster: Cluster) -> None:
    url = pg_cluster.new_database(migrated=True)
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("INSERT INTO _harness_migrations VALUES ('m999_future', 0)")
    with pytest.raises(StorageError, match="m999_future.*newer mcp-harness"):
        PgDatabase(url)


def test_a_database_that_sorts_by_a_language_is_refused(pg_cluster: Cluster) -> None:
    url = pg_cluster.url("icu")
    with psycopg.connect(pg_cluster.url(), autocommit=True) as raw:
        raw.execute("CREATE DATABASE icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'")
    with pytest.raises(StorageError, match="sorts text by an ICU locale.*LC_COLLATE 'C'"):
        PgDatabase(url)


def test_an_unreachable_database_names_the_url_without_its_password(tmp_path: Any) -> None:
    with pytest.raises(StorageError, match="Cannot connect") as caught:
        PgDatabase(f"postgresql://harness:hunter2@/nowhere?host={tmp_path}")
    assert "hunter2" not in str(caught.value)
    assert "postgresql://harness@/nowhere" in str(caught.value)


def test_store_url_takes_only_a_postgresql_url() -> None:
    assert StoreSettings(url="postgresql://harness@db/harness").url == "postgresql://harness@db/harness"
    assert StoreSettings().url is None
    with pytest.raises(ValidationError, match="not a PostgreSQL URL"):
        StoreSettings(url="mysql://db/harness")
