"""The sandbox's limits under attack: processes (cgroup or RLIMIT_NPROC), memory, file size, deadlines, background
processes, cancellation, output floods; after each, the sandbox still works."""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest

import mcp_harness
from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox import Sandbox
from mcp_harness.sandbox.capture import OUTPUT_CAP
from mcp_harness.sandbox.limits import PidsCgroup
from tests.sandbox.conftest import SPAWN_40, DataDir, host_pids_running, run, still_works, working

pytestmark = pytest.mark.anyio


async def test_a_fork_bomb_ends_and_the_harness_stays_healthy(sandbox: Sandbox, data: DataDir) -> None:
    bomb = f"bomb{secrets.token_hex(4)}"  # this run's own name, so another test run's bomb is never counted
    start = time.monotonic()
    shell = await run(sandbox, data, f"{bomb}() {{ {bomb} | {bomb} & }}; {bomb}; sleep 60", "shell", timeout_secs=3)
    assert time.monotonic() - start < 6
    assert "Cannot fork" in shell.stderr and shell.timed_out
    python = await run(sandbox, data, "import os\nwhile True:\n    os.fork()", timeout_secs=5)
    assert "Resource temporarily unavailable" in python.stderr
    with anyio.fail_after(5):  # the kernel reaps a killed namespace asynchronously
        while host_pids_running(f"{bomb} | {bomb} &"):
            await anyio.sleep(0.05)
    await still_works(sandbox, data)


async def test_the_process_limit_is_the_configured_count(data: DataDir) -> None:
    small = working(SandboxSettings(max_processes=8))
    outcome = await run(small, data, SPAWN_40)
    refused, count = outcome.stdout.splitlines()
    assert refused == "refused 11" and 5 <= int(count) <= 8


def test_a_root_server_without_a_pids_cgroup_offers_no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PidsCgroup, "create", classmethod(lambda cls: None))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    refused = Sandbox(SandboxSettings())
    assert (refused.available, refused.runtimes) == (False, ())
    assert "root" in (refused.unavailable_reason() or "") and "cgroup" in (refused.unavailable_reason() or "")


NORMAL_USER_SCRIPT = """
import sys
sys.path[:0] = {paths!r}
import anyio
from pathlib import Path
from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox import Sandbox

async def main():
    sandbox = Sandbox(SandboxSettings(max_processes=8))
    bomb = await sandbox.run("python", {code!r}, workspace=Path({workspace!r}))
    after = await sandbox.run("python", "print(1)", workspace=Path({workspace!r}))
    print(sandbox.check().process_limit, "|", bomb.stdout.strip().replace("\\n", " "), "|", after.stdout.strip())

anyio.run(main)
"""


def _world_readable(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents]) and bool(path.stat().st_mode & 0o004)


def test_a_normal_user_server_bounds_processes_with_rlimit_nproc(tmp_path: Path) -> None:
    """The fallback of `limits` for servers that are not root, run as `nobody` when the tests run as root."""
    if os.geteuid() != 0:
        assert "RLIMIT_NPROC" in working().check().process_limit or "cgroup" in working().check().process_limit
        return
    python = SandboxSettings().python
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    site = Path(anyio.__file__).parent.parent
    code_root = Path(mcp_harness.__file__).parent.parent
    if version.stdout.strip() != str(sys.version_info[:2]) or not (
        _world_readable(site) and _world_readable(code_root)
    ):
        pytest.skip(f"needs {python} at Python {sys.version_info[:2]} and this checkout readable by nobody")
    shared = Path(tempfile.mkdtemp(prefix="mcp-harness-nobody-"))
    try:
        shared.chmod(0o755)
        workspace = shared / "memory"
        workspace.mkdir()
        os.chown(workspace, 65534, 65534)
        script = NORMAL_USER_SCRIPT.format(paths=[str(code_root), str(site)], code=SPAWN_40, workspace=str(workspace))
        done = subprocess.run(
            ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=shared,
            env={"PATH": "/usr/bin:/bin"},
        )
    finally:
        shutil.rmtree(shared)
    assert done.returncode == 0, done.stderr
    limit, bomb, after = (part.strip() for part in done.stdout.split("|"))
    assert limit == "RLIMIT_NPROC inside each call's user namespace"
    refused, errno, count = bomb.split()
    assert (refused, errno, after) == ("refused", "11", "1") and 5 <= int(count) <= 8


async def test_a_memory_hog_fails_to_allocate(data: DataDir) -> None:
    small = working(SandboxSettings(memory_mb=256))
    outcome = await run(small, data, "x = bytearray(512 * 1024 * 1024)\nprint('allocated')")
    assert outcome.exit_code != 0 and "MemoryError" in outcome.stderr and "allocated" not in outcome.stdout
    grow = await run(small, data, "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))")
    assert "MemoryError" in grow.stderr
    await still_works(small, data)


async def test_file_size_is_limited(data: DataDir) -> None:
    small = working(SandboxSettings(max_file_mb=1))
    code = (
        "try:\n    open('big', 'wb').write(b'x' * 2 * 1024 * 1024)\nexcept OSError as e:\n    print('refused', e.errno)"
    )
    outcome = await run(small, data, code)
    assert outcome.stdout == "refused 27\n"  # EFBIG
    assert (data.workspace / "big").stat().st_size <= 1024 * 1024


async def test_an_infinite_loop_is_killed_at_the_deadline(sandbox: Sandbox, data: DataDir) -> None:
    start = time.monotonic()
    outcome = await run(sandbox, data, "print('start', flush=True)\nwhile True:\n    pass", timeout_secs=2)
    elapsed = time.monotonic() - start
    assert outcome.timed_out and outcome.exit_code == 137 and outcome.stdout == "start\n"
    assert 1.9 <= elapsed < 4
    await still_works(sandbox, data)


async def test_the_deadline_kills_double_forked_children_that_ignore_sigterm(sandbox: Sandbox, data: DataDir) -> None:
    marker = f"0.1{time.monotonic_ns() % 10**6:06d}"  # a unique sleep of about 0.1 s, to find the loop by
    code = (
        "import os, signal, time\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        os.execvp('sh', ['sh', '-c', 'trap \"\" TERM; while true; do date >> beat; sleep ' + "
        f"'{marker}; done'])\n"
        "    os._exit(0)\n"
        "time.sleep(60)"
    )
    outcome = await run(sandbox, data, code, timeout_secs=2)
    assert outcome.timed_out
    assert not host_pids_running(marker)
    beat = data.workspace / "beat"
    size = beat.stat().st_size
    assert len(beat.read_text(encoding="utf-8").splitlines()) >= 5  # the loop did run until the deadline
    await anyio.sleep(0.6)
    assert beat.stat().st_size == size
    await still_works(sandbox, data)


async def test_background_processes_do_not_outlive_the_call(sandbox: Sandbox, data: DataDir) -> None:
    marker = f"{time.monotonic_ns() % 10**9}.5"
    outcome = await run(sandbox, data, f"sleep {marker} & echo started", "shell")
    assert (outcome.exit_code, outcome.stdout, outcome.timed_out) == (0, "started\n", False)
    assert not host_pids_running(marker)


async def test_a_cancelled_call_kills_its_sandbox(sandbox: Sandbox, data: DataDir) -> None:
    marker = f"{time.monotonic_ns() % 10**9}.75"
    with anyio.move_on_after(1):
        await sandbox.run("shell", f"sleep {marker}", workspace=data.workspace)
    await anyio.sleep(0.2)
    assert not host_pids_running(marker)
    await still_works(sandbox, data)


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def test_an_output_flood_is_capped_without_growing_server_memory(sandbox: Sandbox, data: DataDir) -> None:
    before = _rss_mib()
    peak = before

    async def sample(_: str) -> None:
        nonlocal peak
        peak = max(peak, _rss_mib())

    outcome = await run(
        sandbox, data, "yes | head -c 400000000; yes err | head -c 100000000 >&2", "shell", on_output=sample
    )
    peak = max(peak, _rss_mib())
    assert outcome.exit_code == 0 and outcome.truncated
    assert len(outcome.stdout.encode()) == OUTPUT_CAP and outcome.stdout.startswith("y\ny\n")
    assert len(outcome.stderr.encode()) == OUTPUT_CAP and outcome.stderr.startswith("err\n")
    assert peak - before < 48, f"server RSS grew {peak - before:.0f} MiB while draining 500 MB of output"
    await still_works(sandbox, data)
