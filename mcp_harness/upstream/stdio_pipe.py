"""A stdio server's process and pipes: the SDK session's transport, with the lean `tools/call` path on the same pipe.

The SDK's `stdio_client` parses every line into a model and hands it on through a task and a memory stream, then
serializes what the session writes through another; that was a sixth of the harness's work per relayed call. Here
the reader offers each line to the lean calls first (`lean.py`: a byte search, and JSON only for a line that can be
theirs), and a lean request is written straight to the pipe; everything else reaches and leaves the session as the
SDK's own transport would pass it (a parse failure becomes an exception in the stream, which the session reports).

The process is started and stopped as the SDK does it: in its own process group, with the SDK's inherited
environment; on close, stdin is closed, then after a grace period the whole group gets SIGTERM, then SIGKILL. The
pipes are our own (`fd_pipe.py`), read and written on their file descriptors.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from mcp_harness.jsonlines import LineBuffer
from mcp_harness.upstream.fd_pipe import Broken, FdPipes
from mcp_harness.upstream.lean import LeanCalls, closed_error

logger = logging.getLogger(__name__)

EXIT_GRACE_S = 2.0
"""How long a server has to exit after its stdin closes (the SDK's figure), and again after SIGTERM."""
POLL_S = 0.02

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        logger.warning("an MCP server wrote a line that is not JSON-RPC: %s", exc)
        return exc


@asynccontextmanager
async def stdio_pipe(
    command: list[str], env: dict[str, str], errlog: TextIO
) -> AsyncIterator[tuple[Streams, LeanCalls]]:
    """Start `command` and yield the session's (read, write) streams and the lean calls on its pipe.

    Raises:
        OSError: the command could not be started.
    """
    # Our own pipes (`fd_pipe.py`), so the loop's subprocess transport never holds them.
    child_in, stdin_fd = os.pipe()
    try:
        stdout_fd, child_out = os.pipe()
    except BaseException:
        os.close(child_in)
        os.close(stdin_fd)
        raise
    try:
        process = await anyio.open_process(
            command,
            stdin=child_in,
            stdout=child_out,
            stderr=errlog,
            env=get_default_environment() | env,
            start_new_session=True,
        )
    except BaseException:
        for fd in (stdin_fd, stdout_fd):
            os.close(fd)
        raise
    finally:
        os.close(child_in)
        os.close(child_out)
    pipes = FdPipes(stdin_fd, stdout_fd)

    async def send_line(data: bytes) -> None:
        # One write per line, whole (`FdPipes.send`): lines from the session and the lean calls never interleave.
        try:
            await pipes.send(data)
        except Broken:
            raise closed_error() from None

    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        lines = LineBuffer()
        try:
            async with read_in:
                while chunk := await pipes.read():
                    for line in lines.feed(chunk):
                        if line.strip() and not lean.take(line):
                            await read_in.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session is gone
        finally:
            lean.closed()
            await _drain(pipes)

    async def writer() -> None:
        try:
            async with write_out:
                async for message in write_out:
                    dumped = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await send_line(dumped.encode("utf-8") + b"\n")
        except MCPError:
            await read_in.aclose()  # the pipe broke: the session sees the connection end, not a hung request

    async with anyio.create_task_group() as tg:

        def spawn(report: Callable[[], Coroutine[Any, Any, None]]) -> None:
            tg.start_soon(report)

        lean = LeanCalls(send_line, spawn)
        tg.start_soon(reader)
        tg.start_soon(writer)
        tg.start_soon(pipes.flush)
        try:
            yield (read_out, write_in), lean
        finally:
            with anyio.CancelScope(shield=True):
                write_in.close()
                read_out.close()
                await _stop(process, pipes)
            tg.cancel_scope.cancel()


async def _drain(pipes: FdPipes) -> None:
    """Read and drop what the server still writes, so one flushing its output at exit is not blocked on a full pipe
    (until its end, or `_stop` closes our end)."""
    with anyio.CancelScope(shield=True):
        while await pipes.read():
            pass


async def _stop(process: anyio.abc.Process, pipes: FdPipes) -> None:
    """Close stdin, wait out the grace period, then end the whole process group (MCP's shutdown sequence)."""
    pipes.close_stdin()
    if not await _exited(process, EXIT_GRACE_S):
        await terminate_posix_process_tree(process, EXIT_GRACE_S)
        if not await _exited(process, EXIT_GRACE_S):
            logger.warning("MCP server process %d is still alive after SIGKILL; leaving it", process.pid)
    pipes.close_stdout()
    transport: Any = getattr(getattr(process, "_process", None), "_transport", None)
    with suppress(Exception):
        transport.close()  # or it warns at collection


async def _exited(process: anyio.abc.Process, within_s: float) -> bool:
    """Polled, not `wait()`: on asyncio that also waits for pipe EOF, which a child holding the pipe never sends."""
    deadline = anyio.current_time() + within_s
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(POLL_S)
    return True
