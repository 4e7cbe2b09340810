"""The SQLite connection: WAL, foreign keys, busy timeout, and a way to run work off the event loop.

One connection serves the process, guarded by a lock, because SQLite serializes writers anyway and a single
connection keeps per-call overhead to one thread hop. Every multi-statement change runs in `transaction()`, which
takes the write lock up front (`BEGIN IMMEDIATE`) so concurrent processes queue instead of failing mid-way.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from mcp_harness.errors import StorageError
from mcp_harness.store import instances
from mcp_harness.store._util import new_id
from mcp_harness.store.checkpoint import BACKSTOP_PAGES, Checkpointer

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
_WAIT_FOR_WRITERS = f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}"


TEMP_IN_MEMORY = "PRAGMA temp_store=MEMORY"
TEMP_IN_FILES = "PRAGMA temp_store=FILE"


class _Busy(Exception):
    """Another process holds the write lock (only raised where the caller asked not to wait for it)."""


class Database:
    """A migrated SQLite database. Use `call` from async code and `transaction` inside the callable."""

    def __init__(self, path: Path) -> None:
        from mcp_harness.store.migrations import migrate

        # The data dir holds the database, the master key and every agent's memory: private to its owner.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = path
        try:
            self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10.0)
            self._conn.row_factory = sqlite3.Row
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(_WAIT_FOR_WRITERS)
            # Checkpoints run beside the writer (`store/checkpoint.py`); SQLite's own, in the commit, is a backstop.
            self._conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        except sqlite3.DatabaseError as exc:
            raise StorageError(
                f"Cannot open the database at {path}: {exc}. Check the file or pick another --data-dir."
            ) from exc
        self._lock = threading.RLock()
        self._wal = str(mode).lower() == "wal"
        """WAL took (a filesystem without shared memory can refuse it): only then does a commit never wait."""
        self._waits = True
        """Whether the connection's busy timeout is the waiting one (`quick` leaves it at 0 until a waiter needs it)."""
        self._writing = False
        """In a write transaction of `_transaction` (it holds the write lock)."""
        self._version: int | None = None
        """`data_version` as read in that transaction, once it has been: no one else can commit meanwhile."""
        self._depth = 0
        self._after_commit: list[Callable[[], None]] = []
        self._commit_listeners: list[Callable[[], None]] = []
        self._checkpointer = Checkpointer(path)
        with self._lock:
            migrate(self._conn)
            # After the migrations (whose index builds may sort a whole table): savepoint journals in memory. The
            # store lane runs a group's calls as savepoints of one transaction, and each page a savepoint changes
            # is copied to its journal, which spills to a temporary file past 64 KiB; in a wide fan-out those
            # writes were a third of each write statement's cost (issue 15). A journal holds the pages one
            # transaction changes, and those are bounded (gc deletes in batches); a full VACUUM, whose copy of the
            # database this would put in memory too, goes back to files (`store/retention.py`).
            self._conn.execute(TEMP_IN_MEMORY)
        self.instance_id = new_id()
        """Who opens the tool calls this connection logs (`store/instances.py`): alive until `close`."""
        instances.here(self.instance_id)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Hold the connection for one atomic change; rolls back on any exception."""
        with self._lock:
            yield from self._transaction(wait=True)

    @contextmanager
    def joined(self) -> Iterator[sqlite3.Connection]:
        """The caller's open transaction as it is, else a new one: for a step whose failure fails the caller's whole
        change anyway (it propagates), where `transaction`'s savepoint would only cost two statements (a logged call
        takes two such steps)."""
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
            else:
                yield from self._transaction(wait=True)

    @contextmanager
    def _free_transaction(self) -> Iterator[sqlite3.Connection]:
        yield from self._transaction(wait=False)

    def _transaction(self, *, wait: bool) -> Iterator[sqlite3.Connection]:
        """`transaction` under the held lock; `wait=False`: raise `_Busy` at once, nothing done, when another
        process holds the write lock (instead of waiting up to the busy timeout)."""
        conn = self._conn
        if conn.in_transaction:
            # Nested use joins the outer transaction under a savepoint, so helpers compose into one atomic
            # change and a failed inner step (caught by the caller) leaves nothing half-done behind it.
            self._depth += 1
            name = f"nested_{self._depth}"
            # What this savepoint registers is what is appended after this mark: dropped if it rolls back, else
            # left where it is, to stand or fall with the savepoint (or transaction) around it. (Rewriting the
            # list at each release cost a lane group of a hundred settles quadratic time.)
            mark = len(self._after_commit)
            conn.execute(f"SAVEPOINT {name}")
            try:
                yield conn
            except BaseException:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
                del self._after_commit[mark:]
                raise
            else:
                conn.execute(f"RELEASE {name}")
            finally:
                self._depth -= 1
            return
        if wait:
            self._waiting()
            conn.execute("BEGIN IMMEDIATE")
        else:
            # Left at 0 afterwards, not restored: `quick` takes most transactions, and the two pragmas cost about
            # what its statements do. Whoever waits next sets it back (`_waiting`); once this transaction holds the
            # write lock, nothing in it waits on anyone in WAL mode.
            if self._waits:
                conn.execute("PRAGMA busy_timeout=0")
                self._waits = False
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                raise _Busy from None
            if not self._wal:  # a rollback-journal commit waits for readers: let it
                conn.execute(_WAIT_FOR_WRITERS)
                self._waits = True
        self._writing = True
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._after_commit = []
            raise
        finally:
            self._writing = False
            self._version = None
        self._checkpointer.committed()
        callbacks, self._after_commit = self._after_commit, []
        for fn in callbacks:
            fn()
        for fn in tuple(self._commit_listeners):
            fn()

    def on_every_commit(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` (quick, must not raise or block: it runs on the committing thread, under the lock) after every
        commit of `transaction()`, so a live view (the console) wakes on change instead of polling; returns what
        stops it. Other processes' commits show in `data_version` instead."""
        self._commit_listeners.append(fn)
        return lambda: self._commit_listeners.remove(fn) if fn in self._commit_listeners else None

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Call `fn` (quick, must not raise) once the current transaction commits; never if it, or the savepoint
        this is called in, rolls back. Outside a transaction, at once."""
        with self._lock:
            if not self._conn.in_transaction:
                fn()
                return
            self._after_commit.append(fn)

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """Hold the connection for reads (no transaction is opened)."""
        with self._lock:
            self._waiting()
            yield self._conn

    def _waiting(self) -> None:
        """Restore the busy timeout before anything that may wait (a read outside a transaction can meet a lock too)."""
        if not self._waits and not self._conn.in_transaction:
            self._conn.execute(_WAIT_FOR_WRITERS)
            self._waits = True

    def data_version(self) -> int:
        """SQLite's counter of commits made by *other* connections (other processes), for cache validation. Read
        once per write transaction: while it holds the write lock no other connection can commit."""
        with self._lock:
            conn = self._conn
            if self._version is not None:
                return self._version
            self._waiting()
            version = int(conn.execute("PRAGMA data_version").fetchone()[0])
            if self._writing:
                self._version = version
            return version

    def run(self, fn: Callable[[Database], T]) -> T:
        """Run `fn` here (blocking); maps unexpected SQLite failures to `StorageError`."""
        try:
            return fn(self)
        except sqlite3.IntegrityError:
            raise
        except sqlite3.OperationalError as exc:
            raise StorageError(f"The database failed: {exc}.") from exc

    async def call(self, fn: Callable[[Database], T]) -> T:
        """Run `fn` on a worker thread so the event loop never waits on SQLite."""
        return await anyio.to_thread.run_sync(self.run, fn)

    async def quick(self, fn: Callable[[], T]) -> T:
        """Run `fn` (short, and nothing but this database's work) in one transaction: here on the event loop when
        that cannot wait on anyone — no thread holds the connection and no other process the write lock — else on a
        worker thread as `call` would.

        Why: for the few small writes on every call's path (logging a call, its answer) the hop to a worker thread
        and back cost several times the write itself, most of what relaying an upstream call added (issue 20). A
        commit in WAL mode with `synchronous=NORMAL` does not sync, and checkpoints run on their own thread, so the
        loop waits only on the statements."""
        if self._lock.acquire(blocking=False):
            try:
                if not self._conn.in_transaction:
                    with self._free_transaction():
                        return fn()
            except _Busy:
                pass
            finally:
                self._lock.release()
        return await anyio.to_thread.run_sync(self._in_transaction, fn)

    def _in_transaction(self, fn: Callable[[], T]) -> T:
        with self.transaction():
            return fn()

    def close(self) -> None:
        self._checkpointer.close()
        with self._lock:
            # Calls still open are nobody's now: the next boot answers them, as after a crash.
            try:
                busy = self._conn.in_transaction
            except sqlite3.ProgrammingError:  # closed already
                busy = True
            if not busy:
                self._waiting()  # the row's delete waits for a writer like any write (`quick` may have left it at 0)
            instances.gone(None if busy else self._conn, self.instance_id)
            self._conn.close()
