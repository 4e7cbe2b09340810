"""Facts about the store itself, one row per key; first of them the marker a shared data root must carry.

With PostgreSQL several replicas share one store, and the memory trees and attachments the store points at live
under the data root, on the file system. A replica whose data root is not the shared one would read and write a
private copy — silently losing files the others see. So the store names a marker (a random id, in `store_meta`)
and the data root carries it in a file: the first start writes both, and a start whose data root lacks the file or
holds another id refuses to serve (`check_data_root`). SQLite needs none of this: its store is a file in the data
root, so the two cannot part.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from mcp_harness.errors import Conflict
from mcp_harness.store._util import new_id

MARKER_KEY = "data_root_marker"
MARKER_FILE = "store-marker"
"""The file in the data root that holds the store's marker."""


def migrate(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def get(conn: Any, key: str) -> str | None:
    row = conn.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def shared_key(db: Any, key: str) -> bytes:
    """32 random bytes kept under `key`, made by the first replica that asks (under the writer lock, so every
    replica of the store gets the same ones)."""
    with db.transaction() as conn:
        value = get(conn, key)
        if value is None:
            value = os.urandom(32).hex()
            conn.execute("INSERT INTO store_meta (key, value) VALUES (?, ?)", (key, value))
    return bytes.fromhex(value)


def check_data_root(db: Any, data_dir: Path, store: str) -> str:
    """Check that `data_dir` carries the marker of the store `db` (named `store` in messages), writing both on the
    first start; returns the marker.

    Raises:
        Conflict: the data root lacks the marker file or holds another store's, naming both and the requirement.
    """
    path = data_dir / MARKER_FILE
    written: str | None = None
    try:
        with db.transaction() as conn:  # the writer lock: replicas starting together see one marker
            marker = get(conn, MARKER_KEY)
            found = _read(path)
            if marker is None:
                if found is not None:
                    raise Conflict(
                        f"The data root {data_dir} belongs to another store (its {MARKER_FILE} holds {found!r}, and "
                        f"the store {store} names no data root yet). Point --data-dir at this store's shared data "
                        f"root, or delete {path} if that data root is meant to move to this new store."
                    )
                marker = new_id()
                conn.execute("INSERT INTO store_meta (key, value) VALUES (?, ?)", (MARKER_KEY, marker))
                written = marker
                _write(path, marker)  # before the commit: a marker in the store always has its file
                return marker
    except BaseException:
        if written is not None and _read(path) == written:
            path.unlink(missing_ok=True)  # the row did not commit: a file without it would refuse every later start
        raise
    if found != marker:
        held = "lacks the marker file" if found is None else f"holds another store's marker ({found!r})"
        raise Conflict(
            f"The data root {data_dir} is not the one the store {store} uses: it {held}, where the store's data "
            f"root has {MARKER_FILE} = {marker!r}. With [store] url every replica must share one data root (memory "
            "trees and attachments live there): mount the shared file system (NFS, CephFS, a shared volume) at "
            "--data-dir on every replica."
        )
    return marker


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def _write(path: Path, marker: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(marker + "\n")
    os.replace(partial, path)  # a reader sees no file or the whole marker, never half of it


__all__ = ["MARKER_FILE", "MARKER_KEY", "check_data_root", "get", "migrate", "shared_key"]
