"""Wake-up hints between replicas on PostgreSQL: `NOTIFY` in a transaction, `LISTEN` on a connection of its own.

A notification is sent at commit (never for a rolled-back change) to every replica listening on its channel, and is
lost for a replica that was not listening at that moment: PostgreSQL keeps no history of them. So a notification is
only ever a hint — "look now rather than at your next poll" — and every consumer keeps polling at its usual interval
as the fallback (docs/postgres.md, "Runs across replicas"). On SQLite there is one process per writer and
`on_every_commit` plays this part.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from mcp_harness.errors import BadRequest

logger = logging.getLogger(__name__)

CHANNEL = re.compile(r"harness_[a-z_]{1,40}")
"""Channels this harness uses: `harness_runs` (a run was queued), `harness_changes` (a resource changed)."""
MAX_PAYLOAD = 7900
"""PostgreSQL refuses payloads of 8000 bytes or more; a hint never needs that much."""
RELAY_WAIT_S = 0.5
"""How long a relay's wait lasts before it looks whether it was stopped."""
RECONNECT_S = 1.0
"""How long a relay waits before it reopens a lost connection."""


def check_channel(channel: str) -> str:
    if not CHANNEL.fullmatch(channel):
        raise BadRequest(f"{channel!r} is not a harness channel: use harness_ and lowercase letters or _ (≤ 48).")
    return channel


def notify(raw: psycopg.Connection[Any], channel: str, payload: str = "") -> None:
    """Queue a notification on `raw`'s open transaction (sent when it commits), or send it now in autocommit."""
    if len(payload.encode()) > MAX_PAYLOAD:
        raise BadRequest(f"A notification carries at most {MAX_PAYLOAD} bytes; send an id, not the data.")
    raw.execute("SELECT pg_notify(%s, %s)", (check_channel(channel), payload))


class Listener:
    """One replica's ear: a dedicated connection listening on `channels` until `close`."""

    def __init__(self, url: str, channels: tuple[str, ...]) -> None:
        # TCP keepalives: a listener only reads, so a peer gone without a reset (a failover) would leave it waiting,
        # deaf, for ever; with them the socket errors within a minute and the caller reconnects or polls.
        self._conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=10,
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=3,
        )
        for channel in channels:
            self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(check_channel(channel))))

    def wait(self, timeout: float) -> list[tuple[str, str]]:
        """The (channel, payload) pairs that arrive within `timeout` seconds: waits for the first, then takes every
        one already there. Empty when none came. Blocking: call it on a worker thread."""
        got = [(n.channel, n.payload) for n in self._conn.notifies(timeout=timeout, stop_after=1)]
        if got:
            got += [(n.channel, n.payload) for n in self._conn.notifies(timeout=0)]
        return got

    def close(self) -> None:
        self._conn.close()


class Relay:
    """Notifications handed to `fn` in batches, on a daemon thread of its own, until `stop`.

    A connection that fails — or could not be opened — is reopened every `RECONNECT_S`, and `on_connect` runs after
    each one opens, since whatever arrived while nobody listened was missed. Consumers poll anyway: a deaf spell
    delays what they see, never loses it. The one listening loop of the harness: the run engine's wake-ups and the
    change bus both ride on it."""

    def __init__(
        self,
        listen: Callable[[], Listener],
        fn: Callable[[list[tuple[str, str]]], None],
        *,
        on_connect: Callable[[], None] | None = None,
        now: bool = True,
    ) -> None:
        """`now`: open the first connection before returning (blocking: the caller hears from here on)."""
        self._listen, self._fn, self._on_connect = listen, fn, on_connect
        self._stop = threading.Event()
        first: Listener | None = None
        if now:
            try:
                first = listen()
            except Exception:
                logger.warning("Cannot listen for notifications yet; polling, and retrying", exc_info=True)
        self._thread = threading.Thread(target=self._serve, args=(first,), name="pg-notify-relay", daemon=True)
        self._thread.start()

    def stop(self, *, join: bool = False) -> None:
        self._stop.set()
        if join and self._thread is not threading.current_thread():
            self._thread.join(timeout=RELAY_WAIT_S * 4)

    def _serve(self, listener: Listener | None) -> None:
        connected = listener is not None
        while not self._stop.is_set():
            try:
                if listener is None:
                    listener = self._listen()
                    connected = True
                if connected:
                    connected = False
                    if self._on_connect is not None:
                        self._on_connect()
                got = listener.wait(RELAY_WAIT_S)
                if got and not self._stop.is_set():
                    self._fn(got)
            except Exception:
                logger.warning("Lost the connection that listens for notifications; reopening it", exc_info=True)
                _close_quietly(listener)
                listener = None
                self._stop.wait(RECONNECT_S)
        _close_quietly(listener)


def _close_quietly(listener: Listener | None) -> None:
    if listener is None:
        return
    try:
        listener.close()
    except Exception:  # closing a broken connection: nothing left to do
        logger.debug("closing a notification connection failed", exc_info=True)


__all__ = [
    "CHANNEL",
    "MAX_PAYLOAD",
    "RECONNECT_S",
    "RELAY_WAIT_S",
    "Listener",
    "Relay",
    "check_channel",
    "notify",
]
