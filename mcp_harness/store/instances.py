"""Which holders of work are still alive: the `instances` table.

Two `mcp-harness serve` processes on one data dir are normal (each stdio client spawns its own), so work left
open cannot be declared interrupted just because a process is booting: only the work of a holder that is gone.

An *instance* is whatever holds work: a `Database` (the tool calls its process logs are opened under its id, in
`open_calls`) and a serving `RunEngine` (its id is the lease owner of the runs it claims). An instance writes its
row — host, pid, the process's start time, a heartbeat — in the same transaction as the first work it holds, and
deletes it when it stops cleanly, so every piece of work names a row that was committed no later than the work.
An instance is judged

- in this process: alive while it is open here (`here`/`gone`, a set in memory), so a harness closed and opened
  again inside one process (as tests restart) leaves its work to the next one exactly as a dead process would;
- in another process of this host (same hostname and pid namespace): alive while its pid runs, unless that pid is
  a zombie or started at another time than the row says (a reused pid);
- elsewhere (containers sharing a volume see other pid namespaces): alive while its heartbeat is younger than
  `STALE_MS`; a serving engine beats every `HEARTBEAT_MS`, and logging a call beats too.

An id without a row (a lease from before this table, a test's made-up owner, a row a sweep removed) is dead.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Collection, Iterable
from pathlib import Path

from mcp_harness.store._util import now_ms

HEARTBEAT_MS = 30_000
STALE_MS = 300_000

_HERE: set[str] = set()
"""Instances of this process still at work."""
_WRITTEN: set[str] = set()
"""Instances of this process that have written their row at least once (so `gone` has a row to delete)."""


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _host(boot: str) -> str:
    # The pid namespace is part of "this host": two containers with one hostname still cannot see each other's pids.
    # So is the boot id: two machines cloned from one image share a hostname and the root namespace's inode, and
    # each would judge the other's pids locally (dead) and take its runs.
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return socket.gethostname()
    return f"{socket.gethostname()}#{namespace}" + (f"#{boot[:8]}" if boot else "")


def _stat(pid: int) -> tuple[str, str] | None:
    """The process's state letter and start time (clock ticks since boot), from /proc; None without /proc."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    return (fields[0], fields[19]) if len(fields) > 19 else None


_BOOT = _read("/proc/sys/kernel/random/boot_id") or ""
HOST = _host(_BOOT)
PID = os.getpid()


def _started(pid: int) -> str | None:
    stat = _stat(pid)
    return None if stat is None else f"{_BOOT}:{stat[1]}"


START = _started(PID)


def here(instance_id: str) -> None:
    """This process holds work under `instance_id` from now on."""
    _HERE.add(instance_id)


def touch(conn: sqlite3.Connection, instance_ids: Iterable[str]) -> None:
    """Write (or refresh the heartbeat of) this process's rows for `instance_ids`, in the caller's transaction."""
    ts = now_ms()
    for instance_id in instance_ids:
        conn.execute(
            "INSERT INTO instances (id, host, pid, proc_start, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            (instance_id, HOST, PID, START, ts, ts),
        )
        _WRITTEN.add(instance_id)


def gone(conn: sqlite3.Connection | None, instance_id: str) -> None:
    """`instance_id` stopped cleanly: what it left open now counts as interrupted. Deletes its row (best effort)."""
    _HERE.discard(instance_id)
    if conn is None or instance_id not in _WRITTEN:
        return
    _WRITTEN.discard(instance_id)
    try:
        conn.execute("DELETE FROM instances WHERE id = ?", (instance_id,))
    except sqlite3.Error:
        pass  # the row only ages: this process's pid is soon gone, which says the same


def _alive(host: str, pid: int, started: str | None, heartbeat_at: int, instance_id: str, ts: int) -> bool:
    if host != HOST:
        return ts - heartbeat_at < STALE_MS
    if pid == PID:
        return instance_id in _HERE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = _stat(pid)
    if stat is None:
        return True  # no /proc: the pid's existence is all there is to go on
    return stat[0] not in ("Z", "X") and (started is None or started == f"{_BOOT}:{stat[1]}")


def alive(conn: sqlite3.Connection, instance_ids: Collection[str] | None = None) -> set[str]:
    """The ids among `instance_ids` (all rows when None) of instances still alive. Blocking (reads /proc)."""
    if instance_ids is None:
        rows = conn.execute("SELECT id, host, pid, proc_start, heartbeat_at FROM instances").fetchall()
    else:
        wanted = sorted(set(instance_ids))
        if not wanted:
            return set()
        marks = ", ".join("?" for _ in wanted)
        rows = conn.execute(
            f"SELECT id, host, pid, proc_start, heartbeat_at FROM instances WHERE id IN ({marks})", wanted
        ).fetchall()
    ts = now_ms()
    return {row[0] for row in rows if _alive(row[1], row[2], row[3], row[4], row[0], ts)}


def sweep(conn: sqlite3.Connection) -> frozenset[str]:
    """The live instances, after deleting the rows of dead ones (in the caller's transaction)."""
    rows = conn.execute("SELECT id FROM instances").fetchall()
    live = alive(conn)
    for (instance_id,) in rows:
        if instance_id not in live:
            conn.execute("DELETE FROM instances WHERE id = ?", (instance_id,))
    return frozenset(live)


def not_in(column: str, ids: Collection[str]) -> tuple[str, list[str]]:
    """A SQL condition (and its arguments) true where `column` names none of `ids` (NULL included)."""
    listed = sorted(ids)
    if not listed:
        return "1 = 1", []  # a comparison, not `1`: PostgreSQL's WHERE takes only booleans
    return f"({column} IS NULL OR {column} NOT IN ({', '.join('?' for _ in listed)}))", listed


__all__ = ["HEARTBEAT_MS", "HOST", "PID", "STALE_MS", "alive", "gone", "here", "not_in", "sweep", "touch"]
