"""`Database.quick`: one transaction, on the event loop only when nothing can make it wait — else on a worker thread,
never half done."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_harness.store import instances
from mcp_harness.store.db import Database
from tests.store.holding import held_by_another_thread

pytestmark = pytest.mark.anyio


def _write(db: Database, value: str, seen: list[str] | None = None) -> str:
    with db.transaction() as conn:  # nested: a savepoint inside quick's transaction
        conn.execute("INSERT INTO store_meta (key, value) VALUES (?, ?)", (value, value))
    if seen is not None:
        seen.append(threading.current_thread().name)
    return value


def _rows(db: Database, prefix: str) -> list[str]:
    with db.reading() as conn:
        return [r[0] for r in conn.execute("SELECT key FROM store_meta WHERE key LIKE ?", (prefix + "%",))]


async def test_a_free_database_runs_it_on_the_event_loop_and_commits(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    seen: list[str] = []
    committed: list[str] = []

    def work() -> str:
        db.after_commit(lambda: committed.append("after"))
        return _write(db, "q-free", seen)

    assert await db.quick(work) == "q-free"
    assert seen == [threading.current_thread().name] and committed == ["after"]
    assert _rows(db, "q-free") == ["q-free"]
    db.close()


async def test_a_failure_rolls_the_whole_transaction_back(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")

    def half() -> None:
        _write(db, "q-half")
        raise RuntimeError("the second step broke")

    with pytest.raises(RuntimeError):
        await db.quick(half)
    assert _rows(db, "q-half") == []
    db.close()


async def test_another_process_holding_the_write_lock_sends_it_to_a_worker_thread(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    other = sqlite3.connect(tmp_path / "h.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # as another harness process would, mid-commit
    seen: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(db.quick, lambda: _write(db, "q-busy", seen))
        await anyio.sleep(0.2)  # the loop stays free meanwhile: this sleep returns while the write waits
        assert seen == []
        other.execute("ROLLBACK")
    assert seen and seen[0] != threading.current_thread().name
    assert _rows(db, "q-busy") == ["q-busy"]
    with db.reading() as conn:  # the wait-free attempt left the busy timeout as it was
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    other.close()
    db.close()


async def test_a_thread_holding_the_connection_sends_it_to_a_worker_thread(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    seen: list[str] = []
    with held_by_another_thread(db) as release:
        async with anyio.create_task_group() as tg:
            tg.start_soon(db.quick, lambda: _write(db, "q-held", seen))
            await anyio.sleep(0.1)
            assert seen == []
            release.set()
    assert seen and seen[0] != threading.current_thread().name
    assert _rows(db, "q-held") == ["q-held"]
    db.close()


async def test_after_quick_left_the_timeout_at_zero_a_waiting_transaction_still_waits_for_another_process(
    tmp_path: Path,
) -> None:
    # `quick` leaves the busy timeout at 0 for the next `quick`; whoever waits must get it back first, or a worker's
    # transaction would fail at once ("database is locked") while another process commits.
    db = Database(tmp_path / "h.db")
    assert await db.quick(lambda: _write(db, "q-first")) == "q-first"
    other = sqlite3.connect(tmp_path / "h.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, lambda: other.execute("ROLLBACK")).start()
    # check_same_thread: the timer's thread runs the rollback on `other`, made without that check below.
    await anyio.to_thread.run_sync(_write, db, "q-waited")
    assert _rows(db, "q-") == ["q-first", "q-waited"]
    other.close()
    db.close()


def test_joined_is_the_callers_transaction_without_a_savepoint_or_one_of_its_own(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    statements: list[str] = []
    with db.transaction() as outer:
        outer.set_trace_callback(statements.append)
        with db.joined() as conn:
            assert conn is outer
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('j-in', 'x')")
        outer.set_trace_callback(None)
    assert not [s for s in statements if "SAVEPOINT" in s or "RELEASE" in s]
    with pytest.raises(RuntimeError), db.transaction() as outer:  # a failure in it undoes the caller's whole change
        outer.execute("INSERT INTO store_meta (key, value) VALUES ('j-undone-outer', 'x')")
        with db.joined() as conn:
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('j-undone-inner', 'x')")
            raise RuntimeError("the step broke")
    with db.joined() as conn:  # alone: its own transaction, committed
        assert conn.in_transaction
        conn.execute("INSERT INTO store_meta (key, value) VALUES ('j-alone', 'x')")
    assert _rows(db, "j-") == ["j-alone", "j-in"]
    db.close()


def test_data_version_is_read_once_in_a_write_transaction_and_again_after_it(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    other = sqlite3.connect(tmp_path / "h.db", isolation_level=None)
    before = db.data_version()
    pragmas: list[str] = []
    with db.transaction() as conn:
        conn.set_trace_callback(pragmas.append)
        assert db.data_version() == db.data_version() == before  # no one else can commit meanwhile
        conn.set_trace_callback(None)
    assert [p for p in pragmas if "data_version" in p] == ["PRAGMA data_version"]
    other.execute("INSERT INTO store_meta (key, value) VALUES ('dv-other', 'x')")  # another process commits
    assert db.data_version() != before
    other.close()
    db.close()


def test_closing_after_quick_waits_for_another_writer_to_delete_its_instance_row(tmp_path: Path) -> None:
    # The row's delete says "this process stopped cleanly"; failing it at once would leave the row to age out.
    db = Database(tmp_path / "h.db")
    with db.transaction() as conn:
        instances.touch(conn, [db.instance_id])
    anyio.run(db.quick, lambda: _write(db, "q-before-close"))  # leaves the busy timeout at 0
    other = sqlite3.connect(tmp_path / "h.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, lambda: other.execute("ROLLBACK")).start()
    db.close()
    rows = other.execute("SELECT COUNT(*) FROM instances WHERE id = ?", (db.instance_id,)).fetchone()
    assert rows == (0,)
    other.close()


class _NoWal(sqlite3.Connection):
    """A connection on which WAL does not take (as on a filesystem without shared memory)."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return super().execute("PRAGMA journal_mode=DELETE" if sql == "PRAGMA journal_mode=WAL" else sql, *args)


async def test_without_wal_quick_commits_wait_for_readers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In a rollback journal a commit waits for readers to finish: a busy timeout of 0 would fail it outright.
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, **{**k, "factory": _NoWal}))
    db = Database(tmp_path / "h.db")
    monkeypatch.setattr(sqlite3, "connect", connect)
    with db.reading() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    reader = sqlite3.connect(tmp_path / "h.db", isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM store_meta").fetchone()  # holds a shared lock until it ends
    threading.Timer(0.3, lambda: reader.execute("COMMIT")).start()
    assert await db.quick(lambda: _write(db, "q-no-wal")) == "q-no-wal"
    assert _rows(db, "q-no-wal") == ["q-no-wal"]
    reader.close()
    db.close()
