"""The change bus between replicas on PostgreSQL: "something committed elsewhere", for live resources and the console.

In one process, `on_every_commit` wakes the live views (`console/live.ChangeFeed`) at once. Replicas share the
database but not the process, so each replica's bus publishes its commits on the `harness_changes` channel and
listens there for the others' (store/pg_notify.py):

- publishing: `on_every_commit` only sets a flag; a thread of the bus sends one `NOTIFY` for every burst of commits
  (at most one per `COALESCE_S`), after they committed and outside the writer's lock, so a writer pays nothing and
  a thousand commits cost a handful of notifications. The payload is this bus's id, so it can skip its own echo.
- listening starts with the first `on_change` (a subscription, a console page), on a thread and a connection of its
  own. A lost connection is reopened, and its listeners are woken once, since what committed meanwhile was missed
  (`pg_notify.Relay`, the one listening loop).

Like every notification this is a hint: the live views re-read what they show and keep their slower rechecks
(`data_version`, `RECHECK_S`), so a lost hint delays an update, never loses it. SQLite needs no bus: one data dir,
one machine, and `data_version` sees the other processes' commits.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_harness.store._util import new_id

if TYPE_CHECKING:
    from mcp_harness.store.pg_notify import Relay

logger = logging.getLogger(__name__)

CHANNEL = "harness_changes"
COALESCE_S = 0.05
"""Commits within this long after a notification ride on the next one."""
_BUSES: weakref.WeakKeyDictionary[Any, ChangeBus] = weakref.WeakKeyDictionary()


class ChangeBus:
    """One replica's end of `harness_changes` over a `PgDatabase` (its `notify`, `listen`, `on_every_commit`)."""

    def __init__(self, db: Any) -> None:
        self._db = db
        self.origin = new_id()
        self._dirty = threading.Event()
        self._pending = False
        self._closed = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._relay: Relay | None = None
        self.listening = threading.Event()
        """Set once the bus listens (its first connection is open): from then on no other replica's commit is missed
        while the connection lasts."""
        self._stop_commits = db.on_every_commit(self._committed)
        self._publishing = threading.Thread(target=self._publish_loop, name="change-bus-publish", daemon=True)
        self._publishing.start()

    @classmethod
    def of(cls, db: Any) -> ChangeBus | None:
        """The bus started over `db`, if any (None on SQLite)."""
        return _BUSES.get(db)

    def on_change(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` (quick, must not block; on the bus's thread) when another replica commits; returns what stops
        it. Starts listening on first use."""
        with self._lock:
            self._listeners.append(fn)
            if self._relay is None and not self._closed.is_set():
                from mcp_harness.store.pg_notify import Relay  # psycopg: the postgres extra, only loaded on PG

                # Opened on the relay's thread (`now=False`): a first subscription must not wait on a connect.
                self._relay = Relay(
                    lambda: self._db.listen(CHANNEL), self._heard, on_connect=self._connected, now=False
                )

        def stop() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return stop

    def close(self) -> None:
        """Stop both threads; what committed since the last notification is still announced."""
        self._stop_commits()
        with self._lock:
            self._closed.set()
        self._dirty.set()
        self._publishing.join(timeout=5)
        with self._lock:  # an `on_change` at this moment sees `_closed` and starts none
            relay = self._relay
        if relay is not None:
            relay.stop(join=True)

    def _committed(self) -> None:
        # On the committing thread: only a flag, so the commit returns at once.
        self._pending = True
        self._dirty.set()

    def _publish_loop(self) -> None:
        while True:
            self._dirty.wait()
            closing = self._closed.is_set()
            self._dirty.clear()
            if self._pending:
                self._pending = False
                try:
                    self._db.notify(CHANNEL, self.origin)
                except Exception:  # a hint lost: the other replicas' rechecks still see the change
                    logger.warning("could not announce a change to the other replicas", exc_info=True)
            if closing:
                return
            self._closed.wait(COALESCE_S)

    def _connected(self) -> None:
        self._wake()  # anything committed while nobody listened was missed: look once
        self.listening.set()

    def _heard(self, got: list[tuple[str, str]]) -> None:
        if any(origin != self.origin for _, origin in got):
            self._wake()

    def _wake(self) -> None:
        with self._lock:
            listeners = tuple(self._listeners)
        for fn in listeners:
            fn()


def start_change_bus(db: Any) -> ChangeBus | None:
    """Start the bus over `db` when it is PostgreSQL (None on SQLite); `close` it before the database."""
    from mcp_harness.store.db import Database

    if isinstance(db, Database):
        return None
    bus = ChangeBus(db)
    _BUSES[db] = bus
    return bus


__all__ = ["CHANNEL", "ChangeBus", "start_change_bus"]
