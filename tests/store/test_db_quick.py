"""`Database.quick`: one transaction, on the event loop only when nothing can make it wait — else on a worker thread,
never half done."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

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
