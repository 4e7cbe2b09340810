"""The index `search {scope: "memory"}` reads: each agent's memory files (path and text) in FTS5 (migration m015).

Kept by reconciling, not at write. Memory changes through paths that never pass a verb — code in the sandbox writes
`/workspace` directly, an owner edits the tree with their own tools, another process serves the same agent — so an
index kept at `write ~/memory` would silently miss files, and a search that misses a file is worse than a slower
one. Before each memory search `changes` walks the tree once, statting every file (descriptor-relative, never
following a symlink: ~0.6 s for 100,000 files) and compares (size, mtime) with what is indexed; only new or changed
files are read, and files that went away are dropped. So repeated searches cost one stat per file, no reads.

Bounds: a file over `MAX_INDEXED_BYTES`, or not UTF-8 text, is indexed by its path alone; one reconcile reads at most
`READ_BUDGET_BYTES` (the rest is picked up by the next search, and the result says the index is partial); a tree of
more than `MAX_FILES` files is indexed up to that many, in walk order. On PostgreSQL the text is a `tsvector` keyed
by the file's id (`store/keyword_index.py`), and the agent trigger's delete cascades to it.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from mcp_harness.memory.paths import TMP_PREFIX, is_addressable
from mcp_harness.store.hm_search import TOKENIZER
from mcp_harness.store.keyword_index import index_for

MAX_INDEXED_BYTES = 1024 * 1024
READ_BUDGET_BYTES = 64 * 1024 * 1024
MAX_FILES = 200_000

SCHEMA = (
    "CREATE TABLE memory_search_files (id INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, path TEXT NOT NULL, "
    "size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, UNIQUE (agent_id, path))",
    f"CREATE VIRTUAL TABLE memory_search_text USING fts5 (path, content, tokenize = '{TOKENIZER}', prefix = '2 3')",
    "CREATE TRIGGER memory_search_agent_gone AFTER DELETE ON agents BEGIN "
    "DELETE FROM memory_search_text WHERE rowid IN (SELECT id FROM memory_search_files WHERE agent_id = old.id); "
    "DELETE FROM memory_search_files WHERE agent_id = old.id; END",
)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Changes:
    """What one reconcile found: files to (re)index with their text, paths gone, and whether it stopped short."""

    upserts: list[tuple[str, int, int, str]]
    """(path, size, mtime_ns, content)"""
    removed: list[str]
    partial: bool


def files(root: str) -> Iterator[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every addressable regular file under `root`, symlinks never followed."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError:
        return
    yield from _files(fd, [])


def _files(fd: int, parts: list[str]) -> Iterator[tuple[str, int, int]]:
    try:
        with os.scandir(fd) as entries:
            listed = list(entries)
        for entry in listed:
            if entry.name.startswith(TMP_PREFIX) or not is_addressable([*parts, entry.name]):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                yield from _files(child, [*parts, entry.name])
            elif stat.S_ISREG(st.st_mode):
                yield "/".join([*parts, entry.name]), st.st_size, st.st_mtime_ns
    finally:
        os.close(fd)


def indexed(conn: sqlite3.Connection, agent_id: str) -> dict[str, tuple[int, int]]:
    rows = conn.execute("SELECT path, size, mtime_ns FROM memory_search_files WHERE agent_id = ?", (agent_id,))
    return {r[0]: (r[1], r[2]) for r in rows}


def changes(root: str, known: dict[str, tuple[int, int]]) -> Changes:
    """Walk the tree and read what differs from `known` (blocking file I/O; no database)."""
    upserts: list[tuple[str, int, int, str]] = []
    seen: set[str] = set()
    budget, partial = READ_BUDGET_BYTES, False
    for count, (path, size, mtime_ns) in enumerate(files(root)):
        if count >= MAX_FILES:
            partial = True
            break
        seen.add(path)
        if known.get(path) == (size, mtime_ns):
            continue
        if size > budget:
            partial = True
            continue
        content = _text(root, path) if size <= MAX_INDEXED_BYTES else ""
        budget -= min(size, MAX_INDEXED_BYTES)
        upserts.append((path, size, mtime_ns, content))
    removed = [] if partial else [path for path in known if path not in seen]
    return Changes(upserts, removed, partial)


def _text(root: str, path: str) -> str:
    """The file's text, or "" when it is binary, unreadable, or reached through a symlink."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in path.split("/")[:-1]:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        file_fd = os.open(path.rsplit("/", 1)[-1], flags, dir_fd=fd)
    except OSError:
        return ""
    finally:
        os.close(fd)
    with os.fdopen(file_fd, "rb") as fh:
        data = fh.read(MAX_INDEXED_BYTES + 1)
    if b"\x00" in data:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def apply(conn: sqlite3.Connection, agent_id: str, found: Changes) -> None:
    """Write one reconcile's findings (inside a transaction)."""
    index = index_for(conn)
    for path in found.removed:
        _drop(conn, agent_id, path)
    for path, size, mtime_ns, content in found.upserts:
        _drop(conn, agent_id, path)
        file_id = conn.execute(
            "INSERT INTO memory_search_files (agent_id, path, size, mtime_ns) VALUES (?,?,?,?) RETURNING id",
            (agent_id, path, size, mtime_ns),
        ).fetchone()[0]
        index.add_memory(conn, int(file_id), path.replace("/", " / "), content)


def _drop(conn: sqlite3.Connection, agent_id: str, path: str) -> None:
    row = conn.execute(
        "SELECT id FROM memory_search_files WHERE agent_id = ? AND path = ?", (agent_id, path)
    ).fetchone()
    if row is not None:
        conn.execute(f"DELETE FROM memory_search_text WHERE {index_for(conn).key} = ?", (row[0],))
        conn.execute("DELETE FROM memory_search_files WHERE id = ?", (row[0],))
