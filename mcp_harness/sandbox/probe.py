"""The one-time check of the host: is bubblewrap here, how are processes bounded, and does a sandbox start.

The check ends by running `sh -c 'exit 0'` through exactly the command line a real call uses, cgroup and limits
included, so that `available` means "a call will start", not merely "bwrap is on PATH".
"""

from __future__ import annotations

import atexit
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox.command import ENV, SHELL, HostLayout, bwrap_argv, find_layout, limits_argv
from mcp_harness.sandbox.limits import PidsCgroup, launcher


@dataclass(frozen=True, slots=True)
class Probe:
    """What the one-time check of this host found."""

    layout: HostLayout | None
    cgroup: PidsCgroup | None
    bwrap_version: str | None
    reason: str | None
    """Why the sandbox cannot run here; None when it can."""

    @property
    def process_limit(self) -> str:
        if self.cgroup is not None:
            return f"pids cgroup per call under {self.cgroup.base}"
        return "RLIMIT_NPROC inside each call's user namespace"


def probe_host(settings: SandboxSettings) -> Probe:
    """Find bwrap and its options, set up the process limit, and start one trivial sandbox. Blocking."""
    layout, reason = find_layout(settings)
    if layout is None:
        return Probe(None, None, None, reason)
    try:
        version = subprocess.run([layout.bwrap, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(layout, None, None, f"bwrap at {layout.bwrap} does not run: {exc}")
    version = version.strip().removeprefix("bubblewrap ") or "unknown"
    cgroup = PidsCgroup.create()
    if cgroup is None and os.geteuid() == 0:
        return Probe(
            layout,
            None,
            version,
            (
                "the server runs as root and no pids cgroup is writable here, so nothing would bound a fork bomb "
                "(RLIMIT_NPROC does not apply to root). Run the server as a normal user, or give it a writable pids "
                "cgroup (cgroup v1 /sys/fs/cgroup/pids, or a delegated cgroup v2 subtree)"
            ),
        )
    if cgroup is not None:
        atexit.register(cgroup.close)
    with tempfile.TemporaryDirectory(prefix="mcp-harness-probe-") as workspace:
        procs = cgroup.enter(settings.max_processes) if cgroup is not None else None
        argv = [*launcher(procs), *bwrap_argv(layout, settings, Path(workspace), None)]
        argv += [*limits_argv(layout, settings, "shell"), SHELL, "-c", "exit 0"]
        try:
            done = subprocess.run(argv, capture_output=True, env=ENV, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            done = subprocess.CompletedProcess(argv, -1, b"", str(exc).encode())
        finally:
            if cgroup is not None and procs is not None:
                cgroup.leave(procs)
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        return Probe(
            layout,
            cgroup,
            version,
            (
                f"bubblewrap {version} is installed but could not start a sandbox: {detail}. User namespaces may be "
                "disabled (sysctl user.max_user_namespaces, or kernel.apparmor_restrict_unprivileged_userns on Ubuntu)"
            ),
        )
    return Probe(layout, cgroup, version, None)
