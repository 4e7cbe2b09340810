"""Wake live views when the database changes, without the browser polling and without scanning tables.

A commit made in this process signals at once (`Database.on_every_commit`); a commit made by another process (a
`serve` or `chat` elsewhere on the same data dir) shows in SQLite's `PRAGMA data_version`, a counter read without
touching any table, which waiters check at most once a second. Views re-read what they show after a wake and send
it only if it changed, so a spurious wake costs one read. On PostgreSQL another replica's commit arrives on the
change bus (`store/change_bus.py`) at once, and `data_version` (there: any write in the cluster) is only its
fallback, read every `BUS_FALLBACK_S`.
"""

from __future__ import annotations

import asyncio
import time

import anyio

from mcp_harness.store.change_bus import ChangeBus
from mcp_harness.store.port import Store

FOREIGN_CHECK_S = 1.0
"""How often waiters look for other processes' commits."""
BUS_FALLBACK_S = 10.0
"""With a change bus, how often waiters still read `data_version`, for a hint the bus lost."""


class ChangeFeed:
    """A generation counter that moves on every commit; `changed(seen, timeout)` waits for it to move."""

    def __init__(self, db: Store, *, foreign_check_s: float = FOREIGN_CHECK_S) -> None:
        self._db = db
        self._foreign_check_s = foreign_check_s
        self.generation = 0
        self._event: anyio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._data_version: int | None = None
        self._checked_at = 0.0
        self._stops = [db.on_every_commit(self._signal)]
        bus = ChangeBus.of(db)
        if bus is not None:
            self._stops.append(bus.on_change(self._signal))
            self._foreign_check_s = max(foreign_check_s, BUS_FALLBACK_S)

    def stop(self) -> None:
        """Stop listening for commits (this process's and, through the bus, other replicas')."""
        for stop in self._stops:
            stop()

    def _signal(self) -> None:
        # Runs on whichever thread committed (or the bus's), under the database lock: it must not block, so it only
        # schedules the bump on the loop (anyio's from_thread would wait for the loop, which may itself be waiting
        # on that lock).
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._bump)

    def _bump(self) -> None:
        self.generation += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    async def changed(self, seen: int, timeout: float) -> int:
        """The generation once it differs from `seen`, or after `timeout` seconds whatever it is."""
        self._loop = asyncio.get_running_loop()
        with anyio.move_on_after(timeout):
            while self.generation == seen:
                if self._event is None:
                    self._event = anyio.Event()
                with anyio.move_on_after(self._foreign_check_s):
                    await self._event.wait()
                await self._check_foreign()
        return self.generation

    async def _check_foreign(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < self._foreign_check_s * 0.9:
            return
        self._checked_at = now
        version = await anyio.to_thread.run_sync(self._db.data_version)
        if self._data_version is not None and version != self._data_version:
            self._bump()
        self._data_version = version


__all__ = ["BUS_FALLBACK_S", "FOREIGN_CHECK_S", "ChangeFeed"]
