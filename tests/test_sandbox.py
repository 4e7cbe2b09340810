"""The bubblewrap sandbox: behaviour, limits, and an attack suite that must fail to escape.

Every attack is followed by `print(1)` in the same sandbox object, to show the harness stayed healthy. These tests
need bubblewrap; without it they fail (not skip) and say how to install it, because CI installs it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketAttribute, SocketStream

import mcp_harness
from mcp_harness.cli import main
from mcp_harness.config import SandboxSettings
from mcp_harness.errors import BadRequest
from mcp_harness.sandbox import ExecOutcome, FileChange, Sandbox
from mcp_harness.sandbox.bwrap import OnOutput, clamp_timeout
from mcp_harness.sandbox.capture import OUTPUT_CAP, TAIL_BYTES
from mcp_harness.sandbox.changes import snapshot
from mcp_harness.sandbox.limits import PidsCgroup

pytestmark = pytest.mark.anyio

SECRETS = ("SECRET-DATABASE", "SECRET-MASTER-KEY", "SECRET-OTHER-AGENT")
SPAWN_40 = (  # tries 40 processes; prints the errno of the refusal, then how many it got
    "import subprocess\nprocs = []\ntry:\n    for _ in range(40):\n"
    "        procs.append(subprocess.Popen(['sleep', '5']))\nexcept OSError as e:\n    print('refused', e.errno)\n"
    "print(len(procs))\nfor p in procs:\n    p.kill()"
)


def working(settings: SandboxSettings | None = None) -> Sandbox:
    sandbox = Sandbox(settings or SandboxSettings())
    if not sandbox.available:
        pytest.fail(
            f"These tests need a working bubblewrap sandbox: {sandbox.unavailable_reason()}. "
            "Install it with `apt-get install bubblewrap` (CI's .ci/run does), then run `mcp-harness doctor`.",
            pytrace=False,
        )
    return sandbox


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return working()


@dataclass(frozen=True)
class DataDir:
    """A fake data directory laid out like the real one, with secrets beside the workspace."""

    root: Path
    workspace: Path
    other_memory: Path


@pytest.fixture
def data(tmp_path: Path) -> DataDir:
    root = tmp_path / "data"
    workspace = root / "agents" / "agent-a" / "memory"
    other = root / "agents" / "agent-b" / "memory"
    workspace.mkdir(parents=True)
    other.mkdir(parents=True)
    (root / "harness.db").write_text("SECRET-DATABASE", encoding="utf-8")
    (root / "master.key").write_text("SECRET-MASTER-KEY", encoding="utf-8")
    (root / "master.key").chmod(0o600)
    (other / "notes.md").write_text("SECRET-OTHER-AGENT", encoding="utf-8")
    return DataDir(root, workspace, other)


async def run(
    sandbox: Sandbox,
    data: DataDir,
    code: str,
    runtime: str = "python",
    *,
    timeout_secs: int | None = None,
    on_output: OnOutput | None = None,
) -> ExecOutcome:
    with anyio.fail_after(30):
        return await sandbox.run(
            runtime, code, workspace=data.workspace, timeout_secs=timeout_secs, on_output=on_output
        )


async def still_works(sandbox: Sandbox, data: DataDir) -> None:
    outcome = await run(sandbox, data, "print(1)")
    assert (outcome.exit_code, outcome.stdout, outcome.timed_out) == (0, "1\n", False)


def host_pids_running(marker: str) -> list[int]:
    """Host processes whose command line contains `marker`."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# Behaviour


async def test_python_and_shell_report_exit_code_stdout_and_stderr(sandbox: Sandbox, data: DataDir) -> None:
    py = await run(sandbox, data, "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)")
    assert (py.exit_code, py.stdout, py.stderr, py.truncated, py.timed_out) == (3, "out\n", "err\n", False, False)
    sh = await run(sandbox, data, "echo hi; echo oops >&2; exit 7", "shell")
    assert (sh.exit_code, sh.stdout, sh.stderr) == (7, "hi\n", "oops\n")
    assert sh.duration_ms >= 0 and sh.changed_files == []


async def test_runtimes_are_offered_in_order_and_unknown_ones_refused(sandbox: Sandbox, data: DataDir) -> None:
    assert sandbox.runtimes[-2:] == ("python", "shell")
    assert set(sandbox.runtimes) <= {"ts", "python", "shell"}
    with pytest.raises(BadRequest) as refused:
        await run(sandbox, data, "print(1)", "ruby")
    assert "python, shell" in refused.value.message
    if "ts" not in sandbox.runtimes:
        with pytest.raises(BadRequest):
            await run(sandbox, data, "console.log(1)", "ts")
    else:
        ts = await run(sandbox, data, "const n: number = 41;\nconsole.log(n + 1);", "ts")
        assert (ts.exit_code, ts.stdout) == (0, "42\n")


async def test_python_is_the_configured_system_interpreter(sandbox: Sandbox, data: DataDir) -> None:
    outcome = await run(sandbox, data, "import sys, os; print(sys.executable); print(os.getcwd()); print(sys.path[0])")
    executable, cwd, path0 = outcome.stdout.splitlines()
    assert executable == SandboxSettings().python != sys.executable
    assert (cwd, path0) == ("/workspace", "")


async def test_environment_is_clean(sandbox: Sandbox, data: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_HARNESS_MASTER_KEY", "leaked-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "leaked-aws")
    outcome = await run(sandbox, data, "import os, json; print(json.dumps(dict(os.environ)))")
    env = json.loads(outcome.stdout)
    assert not [k for k in env if k.startswith("MCP_HARNESS") or k.startswith("AWS")]
    assert "leaked" not in outcome.stdout
    assert env["HOME"] == "/tmp" and env["PATH"] == "/usr/local/bin:/usr/bin:/bin"


async def test_large_python_code_runs_and_large_shell_code_is_refused(sandbox: Sandbox, data: DataDir) -> None:
    filler = "# " + "x" * 150_000 + "\n"
    outcome = await run(sandbox, data, filler + "import sys, os\nprint(sys.path[0] == '', os.getcwd())")
    assert (outcome.exit_code, outcome.stdout) == (0, "True /workspace\n")
    with pytest.raises(BadRequest):
        await run(sandbox, data, filler + "echo hi", "shell")


def test_timeout_is_clamped_to_one_through_three_hundred_seconds() -> None:
    assert clamp_timeout(None, 60) == 60
    assert clamp_timeout(0, 60) == 1
    assert clamp_timeout(-5, 60) == 1
    assert clamp_timeout(10_000, 60) == 300
    assert clamp_timeout(7, 60) == 7


async def test_timeout_below_one_second_runs_for_one(sandbox: Sandbox, data: DataDir) -> None:
    start = time.monotonic()
    outcome = await run(sandbox, data, "import time; time.sleep(30)", timeout_secs=0)
    assert outcome.timed_out and outcome.exit_code == 137
    assert 0.9 <= time.monotonic() - start < 5


async def test_changed_files_lists_added_modified_and_removed_sorted(sandbox: Sandbox, data: DataDir) -> None:
    (data.workspace / "keep.txt").write_text("same", encoding="utf-8")
    (data.workspace / "edit.txt").write_text("before", encoding="utf-8")
    (data.workspace / "gone.txt").write_text("bye", encoding="utf-8")
    code = (
        "import os\nopen('edit.txt', 'w').write('after!')\nos.remove('gone.txt')\n"
        "os.makedirs('sub/deeper')\nopen('sub/deeper/new.md', 'w').write('hi')\nopen('a.txt', 'w').write('a')"
    )
    outcome = await run(sandbox, data, code)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.changed_files == [
        FileChange("a.txt", "added"),
        FileChange("edit.txt", "modified"),
        FileChange("gone.txt", "removed"),
        FileChange("sub/deeper/new.md", "added"),
    ]
    same_size = await run(sandbox, data, "open('edit.txt', 'w').write('AFTER!')")
    assert same_size.changed_files == [FileChange("edit.txt", "modified")]


async def test_a_missing_workspace_is_created(sandbox: Sandbox, data: DataDir) -> None:
    fresh = data.root / "agents" / "agent-new" / "memory"
    outcome = await sandbox.run("shell", "pwd; touch made", workspace=fresh)
    assert outcome.stdout == "/workspace\n" and (fresh / "made").exists()


async def test_progress_receives_the_output_tail_at_most_four_times_a_second(sandbox: Sandbox, data: DataDir) -> None:
    seen: list[tuple[float, str]] = []

    async def on_output(tail: str) -> None:
        seen.append((time.monotonic(), tail))

    code = "import time\nfor i in range(6):\n    print('tick', i, 'x' * 1000)\n    time.sleep(0.2)"
    outcome = await run(sandbox, data, code, on_output=on_output)
    assert outcome.exit_code == 0
    assert len(seen) >= 2
    assert all(len(tail.encode()) <= TAIL_BYTES for _, tail in seen)
    assert "tick 0" not in seen[-1][1] and "tick" in seen[-1][1]
    assert all(b - a >= 0.2 for (a, _), (b, _) in zip(seen, seen[1:], strict=False))


async def test_a_failing_progress_callback_does_not_fail_the_run(
    sandbox: Sandbox, data: DataDir, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0

    async def broken(_: str) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionResetError("client went away")

    code = "import time\nfor i in range(4):\n    print(i)\n    time.sleep(0.2)"
    outcome = await run(sandbox, data, code, on_output=broken)
    assert (outcome.exit_code, outcome.stdout, calls) == (0, "0\n1\n2\n3\n", 1)
    assert "Progress callback failed" in caplog.text


async def test_concurrent_calls_each_get_their_own_sandbox(sandbox: Sandbox, data: DataDir) -> None:
    results: list[ExecOutcome] = []

    async def one(i: int) -> None:
        results.append(await run(sandbox, data, f"import os; print({i}, os.getpid())"))

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(one, i)
    assert sorted(r.stdout.split()[0] for r in results) == ["0", "1", "2", "3"]
    assert all(r.exit_code == 0 for r in results)


async def test_unavailable_sandbox_refuses_and_says_how_to_install(
    data: DataDir, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    missing = Sandbox(SandboxSettings())
    assert (missing.available, missing.runtimes) == (False, ())
    assert "apt-get install bubblewrap" in (missing.unavailable_reason() or "")
    with pytest.raises(BadRequest) as refused:
        await missing.run("python", "print(1)", workspace=data.workspace)
    assert "apt-get install bubblewrap" in refused.value.message and "doctor" in refused.value.message


# Attacks


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


# doctor


def test_doctor_reports_a_working_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    working()
    code = main(["doctor", "--data-dir", str(tmp_path / "data")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[ok] bubblewrap:" in out and "[ok] sandbox:" in out and "python, shell" in out
    assert "[--] network: off" in out and f"[ok] data dir: {tmp_path / 'data'} (writable; created on first use)" in out
    assert "[ok] scripts: Monty runs script children" in out
    (tmp_path / "data").mkdir()
    assert main(["doctor", "--data-dir", str(tmp_path / "data")]) == 0
    assert f"[ok] data dir: {tmp_path / 'data'} (writable)" in capsys.readouterr().out


def test_doctor_without_bwrap_says_how_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code = main(["doctor", "--data-dir", str(tmp_path / "data")])
    out = capsys.readouterr().out
    assert code == 1
    assert "[!!] bubblewrap:" in out and "apt-get install bubblewrap" in out and "dnf install bubblewrap" in out
