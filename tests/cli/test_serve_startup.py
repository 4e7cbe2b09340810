"""`mcp-harness serve` through the real CLI (issue 12.8e): whatever keeps it from starting is one line on stderr and
a nonzero exit (2 for a usage error, 1 otherwise), printed before any banner, never a traceback."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

# The CLI with one name resolving to 0.0.0.0, the way `127.attacker.test` would through a hostile resolver.
_HOSTILE_RESOLVER = """
import socket, sys
real = socket.getaddrinfo
socket.getaddrinfo = lambda host, *a, **k: real("0.0.0.0" if host == "127.attacker.test" else host, *a, **k)
from mcp_harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **extra}


def _serve(tmp_path: Path, *args: str, resolver: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
    command = ["-c", _HOSTILE_RESOLVER] if resolver else ["-m", "mcp_harness"]
    return subprocess.run(
        [sys.executable, *command, "serve", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path, **env),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def _one_line(done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    lines = done.stderr.splitlines()
    assert done.returncode == code and len(lines) == 1, done.stderr
    assert lines[0].startswith("mcp-harness: ") and text in lines[0], done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("mode", [[], ["--http", "127.0.0.1:0"]])
def test_an_unusable_data_dir_is_one_line(tmp_path: Path, mode: list[str]) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    _one_line(_serve(tmp_path, "--data-dir", str(a_file), *mode), 1, "is a file")
    _one_line(_serve(tmp_path, "--data-dir", str(a_file / "data"), *mode), 1, "lies under a file")
    (tmp_path / "db-is-a-dir" / "harness.db").mkdir(parents=True)
    _one_line(_serve(tmp_path, "--data-dir", str(tmp_path / "db-is-a-dir"), *mode), 1, "database")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        _one_line(_serve(tmp_path, "--data-dir", str(locked), *mode), 1, "not writable")


def test_http_start_up_failures_are_one_line_before_any_banner(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _one_line(_serve(tmp_path, *data, "--http", f"127.0.0.1:{port}"), 1, "already in use")
    _one_line(_serve(tmp_path, *data, "--http", "no-such-host.invalid:8765"), 1, "Cannot resolve no-such-host.invalid")
    public = _serve(tmp_path, *data, "--http", "192.0.2.1:8765", MCP_HARNESS_HTTP_TOKENS="a-token")
    _one_line(public, 1, "not one of this machine's")
    _one_line(_serve(tmp_path, *data, "--http", "8765"), 2, "--http takes HOST:PORT")
    _one_line(_serve(tmp_path, *data, "--http", "127.0.0.1:99999"), 2, "--http takes HOST:PORT")
    _one_line(_serve(tmp_path, *data, "--http", "0.0.0.0:0"), 2, "without bearer tokens")
    # A name is loopback only if what it resolves to is: this one starts with "127." and reaches every interface.
    _one_line(_serve(tmp_path, *data, "--http", "127.attacker.test:0", resolver=True), 2, "without bearer tokens")


async def test_serve_http_prints_where_it_listens_then_serves(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mcp_harness", "serve", "--http", "127.0.0.1:0", "--data-dir", str(tmp_path)]
    with anyio.fail_after(60):
        async with await anyio.open_process(command, env=_env(tmp_path)) as proc:
            assert proc.stderr is not None
            banner = b""
            while b"\n" not in banner:
                banner += await proc.stderr.receive()
            found = re.search(
                r"serving Streamable HTTP at (http://127\.0\.0\.1:(\d+)/mcp) — no tokens", banner.decode()
            )
            assert found is not None and found.group(2) != "0", banner
            async with Client(found.group(1), mode="legacy") as c:
                assert "read" in [t.name for t in (await c.list_tools()).tools]
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
