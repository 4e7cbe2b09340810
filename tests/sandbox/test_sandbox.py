"""The bubblewrap sandbox's behaviour: runtimes, a clean environment, timeouts, changed files, progress,
concurrency; and `mcp-harness doctor` on it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import anyio
import pytest

from mcp_harness.cli import main
from mcp_harness.config import SandboxSettings
from mcp_harness.errors import BadRequest
from mcp_harness.sandbox import ExecOutcome, FileChange, Sandbox
from mcp_harness.sandbox.bwrap import clamp_timeout
from mcp_harness.sandbox.capture import TAIL_BYTES
from tests.sandbox.conftest import DataDir, run, working

pytestmark = pytest.mark.anyio


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
