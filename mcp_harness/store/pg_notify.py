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


def relay(listen: Callable[[], Listener], fn: Callable[[list[tuple[str, str]]], None]) -> Callable[[], None]:
    """Listen now (blocking: the caller knows it hears from here on), then call `fn` with each batch of notifications
    on a daemon thread of its own until the returned function is called. A relay that cannot listen (or whose
    connection fails) logs it and does nothing more: its consumer still polls."""
    stop = threading.Event()
    try:
        listener = listen()
    except Exception:
        logger.exception("Cannot listen for notifications; polling only")
        return stop.set

    def serve() -> None:
        try:
            while not stop.is_set():
                got = listener.wait(RELAY_WAIT_S)
                if got and not stop.is_set():
                    fn(got)
        except Exception:
            logger.exception("Listening for notifications failed; polling only")
        finally:
            listener.close()

    threading.Thread(target=serve, name="pg-notify-relay", daemon=True).start()
    return stop.set


__all__ = ["CHANNEL", "MAX_PAYLOAD", "RELAY_WAIT_S", "Listener", "check_channel", "notify", "relay"]
