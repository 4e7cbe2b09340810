"""Attacks that must fail to escape the sandbox: other files and secrets, writes outside the workspace, the network,
host processes, planted symlinks.

Every attack is followed by `print(1)` in the same sandbox object, to show the harness stayed healthy."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream

from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox import FileChange, Sandbox
from mcp_harness.sandbox.changes import snapshot
from tests.sandbox.conftest import SECRETS, DataDir, run, still_works, working

pytestmark = pytest.mark.anyio


async def test_cannot_read_the_database_master_key_or_another_agents_memory(sandbox: Sandbox, data: DataDir) -> None:
    targets = [
        data.root / "harness.db",
        data.root / "master.key",
        data.other_memory / "notes.md",
        "../../../harness.db",
        "../../../master.key",
        "../../agent-b/memory/notes.md",
        "/workspace/../harness.db",
        "/workspace/../../../../master.key",
    ]
    code = (
        "import os, subprocess\n"
        f"for p in {[str(t) for t in targets]!r}:\n"
        "    try:\n        print(open(p).read())\n    except OSError as e:\n        print('denied', p, e.errno)\n"
        "print(os.listdir('/'), os.listdir('/workspace/..'))\n"
        "print(subprocess.run(['sh', '-c', 'find / -path /proc -prune -o \\\\( -name harness.db -o -name master.key '\n"
        "    '-o -name notes.md \\\\) -print 2>/dev/null; grep -rl SECRET- /tmp /run /etc /dev/shm 2>/dev/null'],\n"
        "    capture_output=True, text=True).stdout)"
    )
    outcome = await run(sandbox, data, code)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.count("denied") == len(targets)
    assert not any(s in outcome.stdout for s in SECRETS)
    await still_works(sandbox, data)


async def test_cannot_read_host_secrets_in_etc(sandbox: Sandbox, data: DataDir) -> None:
    outcome = await run(
        sandbox,
        data,
        "for p in /etc/shadow /etc/ssh /etc/ssl/private /root /home; do ls $p || echo no $p; done",
        "shell",
    )
    assert outcome.stdout.split("\n")[:5] == [
        "no /etc/shadow",
        "no /etc/ssh",
        "no /etc/ssl/private",
        "no /root",
        "no /home",
    ]
    await still_works(sandbox, data)


async def test_cannot_write_outside_the_workspace_and_tmp_is_private(
    sandbox: Sandbox, data: DataDir, tmp_path: Path
) -> None:
    marker = f"sandbox-marker-{os.getpid()}-{time.monotonic_ns()}"
    targets = ["/usr/x", "/etc/x", "/x", "/bin/x", "/dev/x", "/proc/x", str(data.root / "x"), "/workspace/../x"]
    code = (
        f"for p in {targets!r}:\n"
        "    try:\n        open(p, 'w').write('pwned')\n        print('WROTE', p)\n"
        "    except OSError as e:\n        print('refused', p, e.errno)\n"
        f"open('/tmp/{marker}', 'w').write('private')\nprint(open('/tmp/{marker}').read())"
    )
    outcome = await run(sandbox, data, code)
    assert "WROTE" not in outcome.stdout, outcome.stdout
    assert outcome.stdout.count("refused") == len(targets)
    assert outcome.stdout.endswith("private\n")
    assert not Path("/tmp", marker).exists() and not (data.root / "x").exists()
    assert outcome.changed_files == []
    await still_works(sandbox, data)


@pytest.fixture
async def loopback_server() -> AsyncIterator[int]:
    """A TCP server on the host's loopback that greets every client; yields its port."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")

    async def greet(client: SocketStream) -> None:
        async with client:
            await client.send(b"hello from the host")

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, greet)
        yield listener.extra(SocketAttribute.local_port)
        tg.cancel_scope.cancel()


CONNECT = "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint(s.recv(100).decode())"


async def test_network_is_off_by_default(sandbox: Sandbox, data: DataDir, loopback_server: int) -> None:
    outcome = await run(sandbox, data, CONNECT.format(port=loopback_server))
    assert outcome.exit_code != 0 and "hello" not in outcome.stdout
    assert "ConnectionRefusedError" in outcome.stderr or "unreachable" in outcome.stderr
    async with await anyio.connect_tcp("127.0.0.1", loopback_server) as host_client:  # the host does get an answer
        assert await host_client.receive() == b"hello from the host"
    await still_works(sandbox, data)


async def test_network_is_on_when_the_setting_says_so(data: DataDir, loopback_server: int) -> None:
    networked = working(SandboxSettings(network=True))
    outcome = await run(networked, data, CONNECT.format(port=loopback_server))
    assert (outcome.exit_code, outcome.stdout) == (0, "hello from the host\n"), outcome.stderr


async def test_host_processes_are_invisible_and_unsignalable(sandbox: Sandbox, data: DataDir) -> None:
    code = (
        "import os, signal\n"
        "print(len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
        f"try:\n    os.kill({os.getpid()}, signal.SIGKILL)\n    print('KILLED')\n"
        "except ProcessLookupError:\n    print('no such process')\n"
        "print(open('/proc/1/cmdline', 'rb').read().split(b'\\0')[0].decode())"
    )
    outcome = await run(sandbox, data, code)
    count, verdict, init = outcome.stdout.splitlines()
    assert int(count) == 2  # bwrap's init and this program: nothing of the host
    assert verdict == "no such process"
    assert init.endswith("bwrap")
    await still_works(sandbox, data)


async def test_planted_symlinks_lead_nowhere_and_are_not_followed(sandbox: Sandbox, data: DataDir) -> None:
    code = (
        "set -u\n"
        "ln -s /etc etc-link; ln -s "
        + str(data.root)
        + " data-link; ln -s ../../.. up-link; ln -s /etc/shadow shadow\n"
        "mkdir -p d && ln -s " + str(data.other_memory) + " d/other\n"
        "cat etc-link/shadow shadow data-link/master.key up-link/harness.db d/other/notes.md 2>&1 || true\n"
        "ls data-link up-link 2>&1 || true"
    )
    outcome = await run(sandbox, data, code, "shell")
    assert not any(s in outcome.stdout for s in SECRETS), outcome.stdout
    assert outcome.changed_files == [
        FileChange("d/other", "added"),
        FileChange("data-link", "added"),
        FileChange("etc-link", "added"),
        FileChange("shadow", "added"),
        FileChange("up-link", "added"),
    ]
    taken = snapshot(data.workspace)
    assert sorted(taken) == ["d/other", "data-link", "etc-link", "shadow", "up-link"]
    assert all(stat.S_ISLNK(sig[0]) for sig in taken.values())
    await still_works(sandbox, data)
