"""WAL checkpoints run beside the writer: the WAL is checkpointed once it grows past the threshold without the
committing connection doing it, and a closed database leaves no WAL behind."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from mcp_harness.store import checkpoint
from mcp_harness.store.db import Database


def test_a_grown_wal_is_checkpointed_on_the_checkpointers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint, "CHECKPOINT_FRAMES", 16)
    done = threading.Event()
    checkpointed_on: list[str] = []
    real_connect = sqlite3.connect

    class Recording(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
            cursor = super().execute(sql, *args)  # pyright: ignore[reportArgumentType]
            if sql.startswith("PRAGMA wal_checkpoint"):
                checkpointed_on.append(threading.current_thread().name)
                done.set()
            return cursor

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        return real_connect(*args, factory=Recording, **kwargs)  # type: ignore[arg-type, call-overload]

    monkeypatch.setattr(checkpoint.sqlite3, "connect", connect)
    db = Database(tmp_path / "h.db")
    try:
        with db.transaction() as conn:
            conn.execute("CREATE TABLE filler (x BLOB)")
        for _ in range(checkpoint.CHECK_EVERY * 4):
            with db.transaction() as conn:
                conn.execute("INSERT INTO filler (x) VALUES (randomblob(16384))")
        assert done.wait(30)
        assert checkpointed_on and set(checkpointed_on) == {"sqlite-checkpoint"}
        with db.reading() as conn:
            assert conn.execute("SELECT COUNT(*) FROM filler").fetchone()[0] == checkpoint.CHECK_EVERY * 4
    finally:
        db.close()
    assert not (tmp_path / "h.db-wal").exists()
    with sqlite3.connect(tmp_path / "h.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_the_commits_own_checkpoint_is_only_a_backstop(tmp_path: Path) -> None:
    db = Database(tmp_path / "h.db")
    try:
        with db.reading() as conn:
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == checkpoint.BACKSTOP_PAGES
    finally:
        db.close()
