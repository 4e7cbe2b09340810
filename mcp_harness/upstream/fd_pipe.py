"""Our ends of a stdio server's stdin and stdout, written and read on their file descriptors (non-blocking).

Why not the event loop's subprocess streams: on asyncio each chunk the server writes reaches a reader one loop turn
late (the subprocess transport hands it on with `call_soon`), and anyio's `send` on the stdin stream ends with a
checkpoint, another turn: two of the nine turns a relayed `tools/call` took, beside the wrappers' own work (issue
20). Here a line goes to the pipe with one `os.write` when the pipe has room, and a reader wakes once per chunk.

A line is never split between writers: what the pipe did not take joins a backlog that only `flush` writes, in
order, and a `send` finding a backlog queues behind it. `send` returns once its line is written or queued, waiting
(cancellably) only while the backlog is over `BACKLOG_BYTES`, as a stream's drain would.
"""

from __future__ import annotations

import os
from collections import deque

import anyio

BACKLOG_BYTES = 64 * 1024
"""What `send` may leave queued before it waits for the server to read (asyncio's default high-water mark)."""
CHUNK = 1 << 16


class Broken(Exception):
    """The server's stdin is closed, or the server is gone."""


class FdPipes:
    """The server's stdin (`send`, `flush`) and stdout (`read`) on our ends of its pipes. One task reads."""

    def __init__(self, stdin_fd: int, stdout_fd: int) -> None:
        os.set_blocking(stdin_fd, False)
        os.set_blocking(stdout_fd, False)
        self._in = stdin_fd
        self._out = stdout_fd
        self._backlog: deque[memoryview] = deque()
        self._queued = 0
        self._work = anyio.Event()
        self._room = anyio.Event()
        self._in_closed = False
        self._out_closed = False

    async def send(self, data: bytes) -> None:
        """Write `data` whole, now or behind the backlog.

        Raises:
            Broken: the pipe is closed or broken (nothing of `data` was queued).
        """
        if self._in_closed:
            raise Broken
        view = memoryview(data)
        if not self._backlog:
            view = self._write(view)
            if not view:
                return
        self._backlog.append(view)
        self._queued += len(view)
        self._work.set()
        while self._queued > BACKLOG_BYTES and not self._in_closed:
            if self._room.is_set():
                self._room = anyio.Event()
            await self._room.wait()  # cancellable: the line is queued whole either way
        if self._in_closed:  # the pipe broke (or closed) before the line was written: it is lost, say so
            raise Broken

    def _write(self, view: memoryview) -> memoryview:
        """What of `view` the pipe did not take now."""
        try:
            while view:
                view = view[os.write(self._in, view) :]
        except BlockingIOError:
            pass
        except OSError:  # the server closed its stdin, or exited
            self.close_stdin()
            raise Broken from None
        return view

    async def flush(self) -> None:
        """Until cancelled, or the pipe breaks: write the backlog out as the pipe takes it."""
        while not self._in_closed:
            await self._work.wait()
            self._work = anyio.Event()
            while self._backlog and not self._in_closed:
                try:
                    await anyio.wait_writable(self._in)
                    if self._in_closed or not self._backlog:  # closed while the wake was on its way
                        return
                    rest = self._write(self._backlog[0])
                except (Broken, anyio.ClosedResourceError, OSError):
                    self.close_stdin()  # nobody else writes the backlog: its senders must not wait on it
                    return
                self._queued -= len(self._backlog[0]) - len(rest)
                if rest:
                    self._backlog[0] = rest
                else:
                    self._backlog.popleft()
                if self._queued <= BACKLOG_BYTES:
                    self._room.set()

    async def read(self) -> bytes:
        """The next chunk the server wrote; b"" at its end, or once stdout is closed here."""
        while not self._out_closed:
            try:
                await anyio.wait_readable(self._out)
            except (anyio.ClosedResourceError, OSError):
                return b""
            if self._out_closed:
                break
            try:
                return os.read(self._out, CHUNK)
            except BlockingIOError:
                continue
            except OSError:
                return b""
        return b""

    def close_stdin(self) -> None:
        """Close the server's stdin (it sees end of input); what is still queued is dropped."""
        if self._in_closed:
            return
        self._in_closed = True
        self._backlog.clear()
        self._queued = 0
        self._room.set()
        self._work.set()
        anyio.notify_closing(self._in)
        os.close(self._in)

    def close_stdout(self) -> None:
        """Stop reading: a `read` waiting now returns b"" (a descendant holding the pipe never sends its end)."""
        if self._out_closed:
            return
        self._out_closed = True
        anyio.notify_closing(self._out)
        os.close(self._out)


__all__ = ["BACKLOG_BYTES", "Broken", "FdPipes"]
