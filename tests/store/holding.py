"""A database's connection held by another thread, as a busy worker (the engine's store lane, a verb) holds it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from mcp_harness.store.port import Store


@contextmanager
def held_by_another_thread(db: Store) -> Iterator[threading.Event]:
    """Inside the block another thread is in a transaction on `db`; set the yielded event (or leave) to let go."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.transaction():
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        yield release
    finally:
        release.set()
        holder.join()
