"""A stdio server's pipes read and written on their file descriptors (`upstream/fd_pipe.py`, `stdio_pipe.py`), with
real processes: lines stay whole and in order past the pipe's buffer, a gone server is an error rather than a hang,
and shutdown neither waits on a descendant that holds the server's stdout nor leaves a descriptor open."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from mcp_harness.jsonlines import LineBuffer
from mcp_harness.upstream import stdio_pipe
from mcp_harness.upstream.fd_pipe import Broken, FdPipes

pytestmark = pytest.mark.anyio

ECHO = [sys.executable, "-c", "import sys\nfor line in sys.stdin.buffer:\n    sys.stdout.buffer.write(line)\n"]


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def _spawn(command: list[str]) -> tuple[anyio.abc.Process, FdPipes]:
    child_in, stdin_fd = os.pipe()
    stdout_fd, child_out = os.pipe()
    process = await anyio.open_process(command, stdin=child_in, stdout=child_out, stderr=None)
    os.close(child_in)
    os.close(child_out)
    return process, FdPipes(stdin_fd, stdout_fd)


async def test_concurrent_lines_past_the_pipe_buffer_arrive_whole_and_in_order() -> None:
    # Four writers at once, lines of 300 KiB among small ones: far past the 64 KiB a pipe holds, so most of each
    # big line waits in the backlog while the others queue behind it.
    process, pipes = await _spawn(ECHO)
    sent = [f"{i:03d}:".encode() + (b"x" * (300 * 1024) if i % 3 == 0 else b"y" * 10) for i in range(24)]
    got: list[bytes] = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(pipes.flush)

            async def send(lines: list[bytes]) -> None:
                for line in lines:
                    await pipes.send(line + b"\n")

            async def read() -> None:
                buffer = LineBuffer()
                while len(got) < len(sent):
                    chunk = await pipes.read()
                    assert chunk, "the echo ended early"
                    got.extend(buffer.feed(chunk))

            tg.start_soon(read)
            for k in range(4):
                tg.start_soon(send, sent[k::4])
            while len(got) < len(sent):
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert sorted(got) == sorted(sent)  # every line whole: no two interleaved
    for k in range(4):  # each writer's lines in the order it sent them
        mine = [line for line in got if line in sent[k::4]]
        assert mine == sent[k::4]
    pipes.close_stdin()
    pipes.close_stdout()
    await process.wait()


async def test_a_send_to_a_server_that_exited_is_broken_not_a_hang() -> None:
    process, pipes = await _spawn([sys.executable, "-c", "pass"])
    await process.wait()
    with anyio.fail_after(10), pytest.raises(Broken):
        for _ in range(100):  # the first writes may land in the pipe's buffer before the reader end is gone
            await pipes.send(b"x" * 4096 + b"\n")
    assert await pipes.read() == b""  # and its stdout is at its end
    with pytest.raises(Broken):
        await pipes.send(b"again\n")  # closed from then on
    pipes.close_stdout()


async def test_shutdown_does_not_wait_on_a_descendant_holding_stdout_and_closes_every_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server starts a process of its own, in a session of its own (so the group kill misses it), which keeps
    # the server's stdout open: the pipe never reaches its end, so the drain must stop when we close our end.
    monkeypatch.setattr(stdio_pipe, "EXIT_GRACE_S", 0.5)
    pid_file = tmp_path / "holder.pid"
    script = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
        "sys.stdin.read()\n"
    )
    before = _open_fds()
    try:
        with anyio.fail_after(20):
            async with stdio_pipe.stdio_pipe([sys.executable, "-c", script], {}, sys.stderr) as ((read, _), _lean):
                assert isinstance(await read.receive(), ValueError)  # 'ready' is not JSON-RPC: the stream says so
        assert _open_fds() == before
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)
