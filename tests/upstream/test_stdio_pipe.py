"""A stdio server's process and pipes (`upstream/stdio_pipe.py`), with a real process: shutdown neither waits on a
descendant that holds the server's stdout nor leaves a descriptor open."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from mcp_harness.upstream import stdio_pipe

pytestmark = pytest.mark.anyio


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


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
