"""stdio: threadless on pipes, sockets and regular files; the SDK's transport on terminals and Windows.

Every line gets a reply: one the SDK's parser would drop silently (not JSON, not UTF-8, too deep, not a JSON-RPC
message) is answered here with the JSON-RPC error `wire.parse` names, and serving goes on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.dispatcher import as_request_id, coerce_request_id
from mcp.shared.message import SessionMessage

from mcp_harness.jsonlines import LineBuffer
from mcp_harness.server import wire
from mcp_harness.server.wire_calls import CLOSED_WRITE_S, WireCalls, closed_reply, opens_modern

logger = logging.getLogger(__name__)


async def serve_stdio(server: Server[Any], calls: WireCalls | None = None) -> None:
    """Serve one client over stdin/stdout until it disconnects.

    When both ends are pipes or sockets (how every MCP client spawns a server), the wire is read and written with
    non-blocking descriptors on the event loop. The SDK's `stdio_server` instead hops to a worker thread for every
    line read, every write and every flush, three hops per call that cost more than a whole memory read; the
    harness spends its one hop on the verb. Regular files (`serve < requests.jsonl`) are read the same way, on a
    worker thread. Terminals and Windows keep the SDK transport. `calls`: the `tools/call` requests answered on
    the wire beside the SDK's pipeline (`server/wire_calls.py`), on the threadless transport.
    """
    if _pipe_like(0) and _pipe_like(1):
        async with _pipe_stdio(calls) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _pipe_like(fd: int) -> bool:
    """A pipe, socket or regular file: something the threadless transport can serve (never a terminal)."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISREG(mode)


# After end of input, how long replies to requests already received may take before the transport closes.
EOF_GRACE_S = 60.0
BACKLOG_BYTES = 1 << 20
"""Replies queued for a client slower to read than we are to answer, before senders wait for it."""


@asynccontextmanager
async def _pipe_stdio(calls: WireCalls | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """Newline-delimited JSON-RPC over fds 0 and 1, as the SDK frames it, without worker threads.

    Like the SDK, the wire moves to private descriptors while serving, and fd 0 / fd 1 point at /dev/null and
    stderr, so a stray print (or a child process inheriting stdio) can never corrupt the protocol stream.
    """
    import fcntl

    input_is_file = stat.S_ISREG(os.fstat(0).st_mode)  # files cannot be polled: read them on a worker thread
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    os.set_blocking(wire_in, False)
    os.set_blocking(wire_out, False)
    try:
        async with _wire(wire_in, wire_out, input_is_file, calls) as streams:
            yield streams
    finally:
        # Anything printed while serving still sits in sys.stdout's buffer; it belongs on stderr, not the wire.
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        for fd in (wire_in, wire_out):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


def _frame(message: types.JSONRPCMessage | types.JSONRPCError) -> bytes:
    """A message as one line on the wire, as the SDK's stdio transport frames it."""
    return (message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


@asynccontextmanager
async def _wire(
    wire_in: int, wire_out: int, input_is_file: bool, calls: WireCalls | None = None
) -> AsyncIterator[tuple[_WireReader, _WireWriter]]:
    """The session's streams over two non-blocking descriptors, for as long as it serves."""
    writer = _WireWriter(wire_out)
    reader = _WireReader(wire_in, input_is_file, writer, calls)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.flush_backlog)  # idle unless the pipe fills: then it, not a sender, drains it
            with anyio.CancelScope() as serving:
                writer.on_broken = serving.cancel  # the client hung up: stop serving
                try:
                    async with anyio.create_task_group() as answering:
                        reader.answering = answering
                        try:
                            yield reader, writer
                        finally:
                            # Calls still answered on the wire end as the SDK's own do at shutdown: "Connection
                            # closed". The SDK has closed its end of the writer by now, not the wire's.
                            answering.cancel_scope.cancel()
                finally:
                    writer.close()
                    with anyio.move_on_after(5):  # replies still queued go out; never hang on a client not reading
                        await writer.drained()
            tg.cancel_scope.cancel()
    finally:
        if writer.broken:
            logger.info("the client closed stdout; stopping")


class _WireWriter(anyio.abc.ObjectSendStream[SessionMessage]):
    """What the session sends, written to the wire in the sender's own task: no writer task to wake per reply.

    A reply goes out in one `os.write` when the pipe has room and nothing waits before it (nearly always). Otherwise
    what is left of it queues, whole and in order, for `flush_backlog`, a task of the transport's own: a sender the
    client cancels (the SDK interrupts a handler on `notifications/cancelled`) can never leave half a frame behind
    for the next reply to land in. A sender waits only while the backlog is over `BACKLOG_BYTES` (back-pressure).
    It also tracks which requests are still owed a reply — until its last byte is written, not queued — for the
    reader's end-of-input grace."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._backlog: deque[tuple[memoryview, Any]] = deque()
        self._queued = 0
        self._work = anyio.Event()
        self._room = anyio.Event()
        self._room.set()
        self._empty = anyio.Event()
        self._empty.set()
        self._closed = False
        self._sdk_closed = False
        self.broken = False
        self.on_broken: Any = None
        self.owed: set[Any] = set()
        self.answered = anyio.Event()

    async def send(self, item: SessionMessage) -> None:
        if self._closed or self._sdk_closed or self.broken:
            raise anyio.ClosedResourceError
        message = item.message
        reply = message.id if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) else None
        await self.send_line(_frame(message), reply)

    async def send_line(self, line: bytes, reply: Any = None) -> None:
        """One encoded frame (`reply`: the id of the request it answers, if it does)."""
        if self._closed or self.broken:
            raise anyio.ClosedResourceError
        data = memoryview(line)
        if not self._backlog:
            data = self._write(data)
            if not data:
                self._written(reply)
                return
        self._backlog.append((data, reply))
        self._queued += len(data)
        self._empty = anyio.Event() if self._empty.is_set() else self._empty
        self._work.set()
        if self._queued > BACKLOG_BYTES:
            self._room = anyio.Event() if self._room.is_set() else self._room
            await self._room.wait()  # cancellable: what it sent is queued whole either way

    def _written(self, reply: Any) -> None:
        if reply is not None:
            self.owed.discard(coerce_request_id(reply))
            self.answered.set()

    def _write(self, data: memoryview) -> memoryview:
        """What of `data` the pipe did not take now."""
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except BlockingIOError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.broken = True
            self._backlog.clear()
            self._queued = 0
            self._empty.set()
            self._room.set()
            if self.on_broken is not None:
                self.on_broken()
            raise anyio.BrokenResourceError from None
        return data

    async def flush_backlog(self) -> None:
        """Until cancelled: write the backlog out whenever there is one, as the pipe takes it."""
        while True:
            await self._work.wait()
            self._work = anyio.Event()
            while self._backlog:
                await anyio.wait_writable(self._fd)
                data, reply = self._backlog[0]
                try:
                    rest = self._write(data)
                except anyio.BrokenResourceError:
                    return
                self._queued -= len(data) - len(rest)
                if rest:
                    self._backlog[0] = (rest, reply)
                else:
                    self._backlog.popleft()
                    self._written(reply)
                if self._queued <= BACKLOG_BYTES:
                    self._room.set()
            self._empty.set()

    async def drained(self) -> None:
        """Once everything sent so far is written (or the client hung up)."""
        await self._empty.wait()

    async def aclose(self) -> None:
        """The SDK's session is done sending: the wire stays open for calls still answered on it (`close`)."""
        self._sdk_closed = True

    def close(self) -> None:
        """The transport is done: nothing more is sent."""
        self._closed = True

    def send_nowait(self, item: SessionMessage) -> None:  # pragma: no cover - the session always awaits `send`
        raise NotImplementedError


@dataclass
class _Answering:
    """A request being answered on the wire: its scope, and whether the client cancelled it."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cancelled: bool = False


class _WireReader(anyio.abc.ObjectReceiveStream[SessionMessage | Exception]):
    """The wire's lines as the session's messages, read in the session's own task: no reader task per request.

    Every line gets a reply: one the SDK would drop (see `wire.parse`) is answered here, and reading goes on. At end
    of input the stream stays open until the requests already read are answered (`EOF_GRACE_S`), so
    `serve < requests.jsonl`, or a client that closes stdin right after its last request, gets every reply."""

    def __init__(self, fd: int, is_file: bool, writer: _WireWriter, calls: WireCalls | None = None) -> None:
        self._fd = fd
        self._is_file = is_file
        self._writer = writer
        self._lines = LineBuffer()
        self._ready: deque[SessionMessage] = deque()
        self._eof = False
        self._calls = calls
        self._modern: bool | None = None
        """The era the SDK serves, once it has the connection's first request (which always goes to it)."""
        self._answered_here: dict[Any, _Answering] = {}
        self.answering: anyio.abc.TaskGroup | None = None
        """Where the calls answered on the wire run (the transport's task group)."""

    async def receive(self) -> SessionMessage | Exception:
        while not self._ready:
            if self._eof:
                await self._grace()
                raise anyio.EndOfStream
            chunk = await self._chunk()
            if chunk is None:
                continue
            if not chunk:
                self._eof = True
                lines = [self._lines.rest()]
            else:
                lines = self._lines.feed(chunk)
            for line in lines:
                await self._take(line)
        return self._ready.popleft()

    async def _take(self, line: bytes) -> None:
        if not line.strip():
            return
        message = wire.parse(line)
        if isinstance(message, types.JSONRPCError):  # the SDK's session would drop the line without a word
            logger.info("refused a line from the client: %s", message.error.message)
            # Not a reply to any request read: a live request with the same id is still owed its own.
            await self._writer.send_line(_frame(message))
            return
        if isinstance(message, types.JSONRPCRequest):
            # Ids as the SDK correlates them (`coerce_request_id`: "7" and 7 are one id).
            self._writer.owed.add(coerce_request_id(message.id))
            if self._modern is None:
                self._modern = opens_modern(message)
            elif self._modern and self._answer_here(message):
                return
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request gets no reply (MCP), so the end-of-input grace must not wait for one. The id is
            # read as the SDK reads it: anything but a string or an integer (a bool, a list) names no request.
            request_id = as_request_id((message.params or {}).get("requestId"))
            if request_id is not None:
                key = coerce_request_id(request_id)
                self._writer.owed.discard(key)
                self._writer.answered.set()
                if (answering := self._answered_here.get(key)) is not None:
                    answering.cancelled = True
                    answering.scope.cancel()
        self._ready.append(SessionMessage(message))

    def _answer_here(self, message: types.JSONRPCRequest) -> bool:
        """Start answering `message` on the wire when `WireCalls` takes it (never an id already in flight here)."""
        key = coerce_request_id(message.id)
        if self._calls is None or self.answering is None or key in self._answered_here:
            return False
        taken = self._calls.takes(message)
        if taken is None:
            return False
        answering = self._answered_here[key] = _Answering()
        self.answering.start_soon(self._answer, message, taken, answering)
        return True

    async def _answer(self, message: types.JSONRPCRequest, taken: tuple[str, Any], answering: _Answering) -> None:
        """As the SDK's dispatcher answers a request: a request the client cancelled gets no reply even when its
        verb could not be interrupted and finished anyway; one cut short by shutdown gets "Connection closed"."""
        assert self._calls is not None
        writing = False
        with answering.scope:
            try:
                line = await self._calls.reply(message, *taken)
                if not answering.cancelled:
                    writing = True
                    await self._writer.send_line(line, message.id)
            except anyio.get_cancelled_exc_class():
                if not writing and not answering.cancelled:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSED_WRITE_S):
                        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                            await self._writer.send_line(closed_reply(message.id), message.id)  # unless gone
                raise
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the client hung up
                pass
            except Exception:  # never the transport's failure: the SDK's pipeline contains a request's too
                logger.exception("answering request %r on the wire failed", message.id)
                self._writer.owed.discard(coerce_request_id(message.id))
                self._writer.answered.set()
            finally:
                del self._answered_here[coerce_request_id(message.id)]

    async def _chunk(self) -> bytes | None:
        if self._is_file:
            return await anyio.to_thread.run_sync(os.read, self._fd, 1 << 16)
        await anyio.wait_readable(self._fd)
        try:
            return os.read(self._fd, 1 << 16)
        except BlockingIOError:
            return None

    async def _grace(self) -> None:
        writer = self._writer
        with anyio.move_on_after(EOF_GRACE_S):
            while writer.owed:
                writer.answered = anyio.Event()
                await writer.answered.wait()

    async def aclose(self) -> None:
        self._eof = True

    def receive_nowait(self) -> SessionMessage | Exception:  # pragma: no cover - the session always awaits
        raise NotImplementedError


__all__ = ["EOF_GRACE_S", "serve_stdio"]
