"""What the sandbox suites share: a working sandbox (or a failure saying how to install bubblewrap), a fake data
directory with secrets beside the workspace, and helpers to run code and check the sandbox still works.

These tests need bubblewrap; without it they fail (not skip) and say how to install it, because CI installs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox import ExecOutcome, Sandbox
from mcp_harness.sandbox.bwrap import OnOutput

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
