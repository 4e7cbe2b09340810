"""A stdio server's process and pipes: the SDK session's transport, with the lean `tools/call` path on the same pipe.

The SDK's `stdio_client` parses every line into a model and hands it on through a task and a memory stream, then
serializes what the session writes through another; that was a sixth of the harness's work per relayed call. Here
the reader offers each line to the lean calls first (`lean.py`: a byte search, and JSON only for a line that can be
theirs), and a lean request is written straight to the pipe; everything else reaches and leaves the session as the
SDK's own transport would pass it (a parse failure becomes an exception in the stream, which the session reports).

The process is started and stopped as the SDK does it: in its own process group, with the SDK's inherited
environment; on close, stdin is closed, then after a grace period the whole group gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import logging
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
    process = await anyio.open_process(
        command, env=get_default_environment() | env, stderr=errlog, start_new_session=True
    )
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None  # opened with pipes

    async def send_line(data: bytes) -> None:
        # One write per line: the transport buffers it whole, so lines from the session and the lean calls never
        # interleave; drain only applies back-pressure.
        try:
            await stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            raise closed_error() from None

    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        lines = LineBuffer()
        try:
            async with read_in:
                async for chunk in stdout:
                    for line in lines.feed(chunk):
                        if line.strip() and not lean.take(line):
                            await read_in.send(_parse(line))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # the session is gone, or our own shutdown closed the pipe under the read
        finally:
            lean.closed()
            await _drain(stdout)

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
        try:
            yield (read_out, write_in), lean
        finally:
            with anyio.CancelScope(shield=True):
                write_in.close()
                read_out.close()
                await _stop(process)
            tg.cancel_scope.cancel()


async def _drain(stdout: anyio.abc.ByteReceiveStream) -> None:
    """Read and drop what the server still writes, so one flushing its output at exit is not blocked on a full pipe."""
    with anyio.CancelScope(shield=True), suppress(Exception):
        while True:
            await stdout.receive()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, wait out the grace period, then end the whole process group (MCP's shutdown sequence)."""
    with suppress(Exception):
        await process.stdin.aclose()  # pyright: ignore[reportOptionalMemberAccess]
    if not await _exited(process, EXIT_GRACE_S):
        await terminate_posix_process_tree(process, EXIT_GRACE_S)
        if not await _exited(process, EXIT_GRACE_S):
            logger.warning("MCP server process %d is still alive after SIGKILL; leaving it", process.pid)
    with suppress(Exception):
        await process.stdout.aclose()  # pyright: ignore[reportOptionalMemberAccess]
    transport: Any = getattr(getattr(process, "_process", None), "_transport", None)
    with suppress(Exception):
        transport.close()  # or it warns at collection while a descendant holds a pipe


async def _exited(process: anyio.abc.Process, within_s: float) -> bool:
    """Polled, not `wait()`: on asyncio that also waits for pipe EOF, which a child holding the pipe never sends."""
    deadline = anyio.current_time() + within_s
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(POLL_S)
    return True
