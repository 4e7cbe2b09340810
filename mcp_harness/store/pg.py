"""The PostgreSQL store (`[store] url = "postgresql://…"`): `PgDatabase`, the same port as `store/db.py`'s `Database`.

The stores run through `PgConnection` (store/pg_connection.py), the subset of `sqlite3.Connection` they use.

Transactions keep SQLite's semantics on purpose (docs/postgres.md, "phase 1"): every `transaction()` takes one
cluster-wide advisory lock first, so writers queue as under `BEGIN IMMEDIATE` and a store's read-then-write stays
atomic across replicas without a line of it changing. Reads outside a transaction run in autocommit, as WAL readers
do. A store whose writes must run side by side (run claims) moves to row locks in its own port.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from mcp_harness.errors import StorageError
from mcp_harness.store import instances
from mcp_harness.store._util import new_id
from mcp_harness.store.pg_connection import PgConnection, PgCursor, Row, configure, literal
from mcp_harness.store.pg_notify import Listener, Relay, notify

T = TypeVar("T")
logger = logging.getLogger(__name__)

WRITER_LOCK = 0x6D63_7068_0001
"""The advisory lock every write transaction holds (SQLite's single writer, fleet-wide); migrations take another."""
CLAIM_LOCK = 0x6D63_7068_0002
"""The advisory lock run claims take instead of `WRITER_LOCK` (`claiming`): claims queue behind each other only."""


class _ThreadState(threading.local):
    conn: PgConnection | None = None
    depth: int = 0
    after: list[tuple[int, Callable[[], None]]]

    def __init__(self) -> None:
        self.after = []


class PgDatabase:
    """A migrated PostgreSQL database behind a connection pool; the interface of `store.db.Database`."""

    backend = "postgres"
    """What `store.dialect.backend` says of its connections; stores ask it of the database without importing this."""
    errors: tuple[type[Exception], ...] = (psycopg.Error,)
    """The driver's failures, for a loop that retries after a database error (the run pump) without importing it."""

    def __init__(self, url: str, *, pool_size: int = 8, migrate: bool = True, data_dir: Path | None = None) -> None:
        from mcp_harness.store.pg_migrations import migrate as apply

        self.url = url
        self.data_dir = data_dir
        """The shared data root the files beside the rows live in (IPFS blocks), when the harness names one."""
        # One direct connection first: a wrong URL fails now with the server's reason (a pool would retry until its
        # timeout), and the migrations run on it before any pooled connection exists.
        try:
            first = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise StorageError(
                f"Cannot connect to the PostgreSQL database at {_redacted(url)}: {str(exc).strip()}. Check [store] url."
            ) from exc
        with first:
            configure(first)
            _require_byte_order(first, url)
            if migrate:
                apply(PgConnection(first))
        self._pool = ConnectionPool(
            url, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, configure=configure, open=True
        )
        self._state = _ThreadState()
        self._commit_listeners: list[Callable[[], None]] = []
        self.instance_id = new_id()
        instances.here(self.instance_id)

    @contextmanager
    def transaction(self, *, lock: bool = True) -> Iterator[PgConnection]:
        """One atomic change on this thread's connection; nested use joins it under a savepoint (as `Database`).

        `lock=False` (phase 2, docs/postgres.md): an outermost transaction without the writer lock, for a store whose
        statements serialize by row locks themselves. Nested, it joins the outer one (and whatever lock it holds)."""
        state = self._state
        if state.conn is not None:
            conn = state.conn
            state.depth += 1
            depth = state.depth
            name = f"nested_{depth}"
            conn.raw.execute(literal(f"SAVEPOINT {name}"))
            try:
                yield conn
            except BaseException:
                conn.raw.execute(literal(f"ROLLBACK TO SAVEPOINT {name}"))
                conn.raw.execute(literal(f"RELEASE SAVEPOINT {name}"))
                state.after = [(d, fn) for d, fn in state.after if d < depth]
                raise
            else:
                conn.raw.execute(literal(f"RELEASE SAVEPOINT {name}"))
                state.after = [(min(d, depth - 1), fn) for d, fn in state.after]
            finally:
                state.depth -= 1
            return
        with self._pool.connection() as raw:
            conn = PgConnection(raw)
            raw.execute("BEGIN")
            state.conn = conn
            try:
                if lock:
                    raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
                yield conn
                raw.execute("COMMIT")
            except BaseException:
                if raw.info.transaction_status != TransactionStatus.IDLE:
                    raw.execute("ROLLBACK")
                state.after = []
                raise
            finally:
                state.conn = None
        callbacks, state.after = state.after, []
        for _, fn in callbacks:
            fn()
        for fn in tuple(self._commit_listeners):
            fn()

    @contextmanager
    def joined(self) -> Iterator[PgConnection]:
        """The caller's open transaction as it is, else a new one (as `Database.joined`: no savepoint)."""
        if self._state.conn is not None:
            yield self._state.conn
        else:
            with self.transaction() as conn:
                yield conn

    @contextmanager
    def claiming(self) -> Iterator[PgConnection]:
        """A run claim's transaction (store/run_claims.py): not behind the writers, only behind other claims, so a
        fleet's claims count live runs exactly; the candidates are taken `FOR UPDATE SKIP LOCKED`. Inside another
        transaction it joins that one."""
        with self.transaction(lock=False) as conn:
            conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            yield conn

    def on_every_commit(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` after every commit of `transaction()` in this process (other replicas': `data_version`)."""
        self._commit_listeners.append(fn)
        return lambda: self._commit_listeners.remove(fn) if fn in self._commit_listeners else None

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Call `fn` once the current transaction (on this thread) commits; never if it or its savepoint rolls
        back. Outside a transaction, at once."""
        if self._state.conn is None:
            fn()
            return
        self._state.after.append((self._state.depth, fn))

    @contextmanager
    def reading(self) -> Iterator[PgConnection]:
        """A connection for reads: this thread's transaction if one is open (it sees its own writes), else a
        pooled connection in autocommit."""
        if self._state.conn is not None:
            yield self._state.conn
            return
        with self._pool.connection() as raw:
            yield PgConnection(raw)

    def notify(self, channel: str, payload: str = "") -> None:
        """A wake-up hint to every replica listening on `channel` (store/pg_notify.py): sent when this thread's
        transaction commits — never if it rolls back — or at once outside one."""
        conn = self._state.conn
        if conn is not None:
            notify(conn.raw, channel, payload)
            return
        with self._pool.connection() as raw:
            notify(raw, channel, payload)

    def listen(self, *channels: str) -> Listener:
        """A connection of its own listening on `channels` (close it when done)."""
        return Listener(self.url, channels)

    def on_notify(self, channel: str, wake: Callable[[], None]) -> Callable[[], None]:
        """Call `wake()` (from a thread of its own) whenever a notification arrives on `channel`; returns the function
        that stops listening. For a consumer that polls anyway and only wants to look sooner."""
        # `on_connect`: after a dropped connection is reopened, look once for what came while nobody listened.
        return Relay(lambda: self.listen(channel), lambda _got: wake(), on_connect=wake).stop

    def data_version(self) -> int:
        """A stamp that moves whenever anything commits anywhere in the cluster (the WAL insert position): caches
        keyed on it are invalidated by other replicas' writes, and by more than those, never by fewer."""
        with self.reading() as conn:
            row = conn.execute("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint").fetchone()
        assert row is not None
        return int(row[0])

    def run(self, fn: Callable[[PgDatabase], T]) -> T:
        """Run `fn` here (blocking); maps unexpected database failures to `StorageError`."""
        try:
            return fn(self)
        except sqlite3.IntegrityError:
            raise
        except psycopg.Error as exc:
            raise StorageError(f"The database failed: {exc}.") from exc

    async def call(self, fn: Callable[[PgDatabase], T]) -> T:
        """Run `fn` on a worker thread so the event loop never waits on the database."""
        return await anyio.to_thread.run_sync(self.run, fn)

    async def quick(self, fn: Callable[[], T]) -> T:
        """`Database.quick`: always on a worker thread here, since every statement is a network round trip."""
        return await anyio.to_thread.run_sync(self._in_transaction, fn)

    def _in_transaction(self, fn: Callable[[], T]) -> T:
        with self.transaction():
            return fn()

    def close(self) -> None:
        if self._pool.closed:  # closing twice is a no-op, as SQLite's `Database.close` is
            return
        try:
            with self._pool.connection() as raw:
                instances.gone(PgConnection(raw), self.instance_id)  # pyright: ignore[reportArgumentType]
        finally:
            self._pool.close()


_BYTE_ORDER = ("C", "POSIX", "C.UTF-8", "C.utf8")


def _require_byte_order(raw: psycopg.Connection[Any], url: str) -> None:
    """Refuse a database that sorts text by a language's rules: SQLite compares bytes, and the stores' orderings,
    keyset pages and range scans (a directory as `path >= ? AND path < ?`) assume it."""
    row = raw.execute(
        "SELECT datcollate, datlocprovider FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    if row is not None and (row[1] != "c" or row[0] not in _BYTE_ORDER):
        rule = row[0] if row[1] == "c" else "an ICU locale"
        raise StorageError(
            f"The PostgreSQL database at {_redacted(url)} sorts text by {rule}; mcp-harness needs byte order, as "
            "SQLite's. Create it with `CREATE DATABASE harness TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE "
            "'C.UTF-8'` (or initdb --no-locale)."
        )


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    head, sep, tail = url.partition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    return f"{scheme}://{userinfo.split(':', 1)[0]}@{tail}"


__all__ = ["CLAIM_LOCK", "WRITER_LOCK", "PgConnection", "PgCursor", "PgDatabase", "Row"]
