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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from mcp_harness.server import wire

logger = logging.getLogger(__name__)


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over stdin/stdout until it disconnects.

    When both ends are pipes or sockets (how every MCP client spawns a server), the wire is read and written with
    non-blocking descriptors on the event loop. The SDK's `stdio_server` instead hops to a worker thread for every
    line read, every write and every flush, three hops per call that cost more than a whole memory read; the
    harness spends its one hop on the verb. Regular files (`serve < requests.jsonl`) are read the same way, on a
    worker thread. Terminals and Windows keep the SDK transport.
    """
    if _pipe_like(0) and _pipe_like(1):
        async with _pipe_stdio() as (read_stream, write_stream):
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


@asynccontextmanager
async def _pipe_stdio() -> AsyncIterator[tuple[Any, Any]]:
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
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
    refusals = outbound.clone()  # the reader answers lines the session cannot, through the same ordered writer

    # Requests still owed a reply: at end of input the session stays open until they are answered, so
    # `serve < requests.jsonl` (or a client that closes stdin right after its last request) gets every reply.
    owed: set[Any] = set()
    answered = anyio.Event()

    async def deliver(line: bytes) -> None:
        if not line.strip():
            return
        message = wire.parse(line)
        if isinstance(message, types.JSONRPCError):  # the SDK's session would drop the line without a word
            logger.info("refused a line from the client: %s", message.error.message)
            await refusals.send(SessionMessage(message))
            return
        if isinstance(message, types.JSONRPCRequest):
            owed.add(message.id)
        await inbound_send.send(SessionMessage(message))

    async def read_chunk() -> bytes | None:
        if input_is_file:
            return await anyio.to_thread.run_sync(os.read, wire_in, 1 << 16)
        await anyio.wait_readable(wire_in)
        try:
            return os.read(wire_in, 1 << 16)
        except BlockingIOError:
            return None

    async def read_wire() -> None:
        nonlocal answered
        buffer = bytearray()
        async with inbound_send, refusals:
            while True:
                chunk = await read_chunk()
                if chunk is None:
                    continue
                if not chunk:
                    break
                scan_from = len(buffer)
                buffer += chunk
                start = 0
                while (end := buffer.find(b"\n", scan_from)) >= 0:
                    await deliver(bytes(buffer[start:end]))
                    start = scan_from = end + 1
                del buffer[:start]
            await deliver(bytes(buffer))
            with anyio.move_on_after(EOF_GRACE_S):
                while owed:
                    answered = anyio.Event()
                    await answered.wait()

    drained = anyio.Event()

    async def write_wire() -> None:
        async with outbound_receive:
            async for session_message in outbound_receive:
                message = session_message.message
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    owed.discard(message.id)
                    answered.set()
                json = message.model_dump_json(by_alias=True, exclude_unset=True)
                pending = memoryview((json + "\n").encode())
                while pending:
                    try:
                        pending = pending[os.write(wire_out, pending) :]
                    except BlockingIOError:
                        await anyio.wait_writable(wire_out)
        drained.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_wire)
            tg.start_soon(write_wire)
            try:
                yield inbound, outbound
            finally:
                await outbound.aclose()
                # Let queued replies drain, but never hang on a client that stopped reading.
                with anyio.move_on_after(5):
                    await drained.wait()
                tg.cancel_scope.cancel()
    except* BrokenPipeError:
        logger.info("the client closed stdout; stopping")
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


__all__ = ["EOF_GRACE_S", "serve_stdio"]
