"""Reading a sandboxed program's output in bounded memory: the head of each stream, and a tail for progress.

A program may print gigabytes. Each stream keeps its first `OUTPUT_CAP` bytes and counts the rest while still
draining the pipe, so the program never blocks on a full pipe and the server never holds more than the cap.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import ByteReceiveStream

logger = logging.getLogger(__name__)

OUTPUT_CAP = 64 * 1024
"""Bytes kept per stream (the reference's `MAX_EXEC_OUTPUT_BYTES`); the head is kept."""
TAIL_BYTES = 2 * 1024
"""Bytes of recent combined output handed to the progress callback."""
PROGRESS_INTERVAL = 0.25
"""Seconds between progress callbacks at most (so at most four a second)."""
_CHUNK = 64 * 1024


class Capped:
    """The head of one output stream."""

    __slots__ = ("data", "truncated")

    def __init__(self) -> None:
        self.data = bytearray()
        self.truncated = False

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class Tail:
    """The last `TAIL_BYTES` of stdout and stderr together, in arrival order, with a change counter."""

    __slots__ = ("data", "version")

    def __init__(self) -> None:
        self.data = bytearray()
        self.version = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk[-TAIL_BYTES:]
        if len(self.data) > TAIL_BYTES:
            del self.data[:-TAIL_BYTES]
        self.version += 1

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def pump(stream: ByteReceiveStream, into: Capped, tail: Tail) -> None:
    """Read `stream` to its end, keeping the head in `into` and feeding `tail`."""
    while True:
        try:
            chunk = await stream.receive(_CHUNK)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return
        room = OUTPUT_CAP - len(into.data)
        if room > 0:
            into.data += chunk[:room]
        if len(chunk) > room:
            into.truncated = True
        tail.add(chunk)


async def report_progress(tail: Tail, on_output: Callable[[str], Awaitable[None]]) -> None:
    """Call `on_output` with the tail whenever it changed, at most every `PROGRESS_INTERVAL`; runs until cancelled.

    A callback that fails is logged and not called again: progress is a courtesy to the client, and losing it (say,
    the client went away mid-call) must not kill the program it reports on.
    """
    seen = 0
    while True:
        await anyio.sleep(PROGRESS_INTERVAL)
        if tail.version != seen:
            seen = tail.version
            try:
                await on_output(tail.text())
            except Exception:  # the top of a background task: nothing above it could handle this better
                logger.exception("Progress callback failed; no more progress for this call")
                return
