"""How a sandboxed call's process count is bounded, so that a fork bomb ends and the host stays healthy.

RLIMIT_NPROC alone is not enough. The kernel skips the check for the root user (`copy_process` exempts
`INIT_USER`), and CI runs the server as root: a bwrap user namespace maps sandbox uid 0 back to host uid 0, so the
limit does nothing there. The chosen mechanism, tried in this order when the sandbox is first probed:

1. **A pids cgroup per call**, when the server can create one: root on a cgroup v1 `pids` hierarchy (this is CI's
   case: `/sys/fs/cgroup/pids`), or a cgroup v2 tree where `pids` is enabled and the parent of the server's own
   cgroup is writable (root, or a user whose systemd session delegates its subtree). The call's launcher, a
   `/bin/sh` that then `exec`s bwrap in place, writes its own pid into the group first, so every task of the call
   is born inside it and `pids.max` counts them all, whatever their uid.
2. **RLIMIT_NPROC set inside the sandbox**, for a server that is not root. Since Linux 5.14 the count behind it is
   kept per (user namespace, uid), and each call gets a fresh user namespace, so a limit applied after bwrap made
   that namespace counts that call's tasks alone. (Set before bwrap, it would instead become the new namespace's
   ceiling on the user's whole process count, and fail for anyone with more processes than the limit.)
3. **Root with no pids cgroup it can write: no sandbox.** Nothing else bounds root's forks, so `execute` and lambdas
   are not offered, and `mcp-harness doctor` says why.

The in-sandbox RLIMIT_NPROC is applied in case 1 as well, where it is redundant for root and a second bound for
anyone else. Both counts include threads, plus one or two tasks of bwrap's own, which the limits allow for.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

CGROUP_OVERHEAD = 2
"""Tasks in the call's cgroup that are bwrap's, not the code's: the launcher turned monitor, and the sandbox init."""
NPROC_OVERHEAD = 1
"""Tasks in the call's user namespace that are bwrap's: the sandbox init."""
_PREFIX = "mcp-harness-"
_calls = itertools.count(1)


def _mounts() -> list[tuple[str, str, str, str]]:
    """(mount root, mount point, fs type, super options) of every cgroup mount, from /proc/self/mountinfo."""
    found: list[tuple[str, str, str, str]] = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            fstype = fields[sep + 1]
            if fstype in ("cgroup", "cgroup2"):
                found.append((fields[3], fields[4], fstype, fields[sep + 3]))
    return found


def _groups_parent() -> tuple[Path, bool] | None:
    """Where this server's group of call groups goes, and whether that is cgroup v2; None without `pids`."""
    with open("/proc/self/cgroup", encoding="utf-8") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    mounts = _mounts()
    for hid, controllers, path in lines:
        if hid != "0" and "pids" in controllers.split(","):
            for root, point, fstype, opts in mounts:
                if fstype == "cgroup" and "pids" in opts.split(",") and path.startswith(root):
                    # v1 lets a group hold processes and subgroups alike: nest below the server's own group.
                    return Path(point, path[len(root) :].lstrip("/")), False
    for hid, _controllers, path in lines:
        if hid == "0":
            for root, point, fstype, _opts in mounts:
                if fstype == "cgroup2" and path.startswith(root):
                    own = Path(point, path[len(root) :].lstrip("/"))
                    if "pids" not in (own / "cgroup.controllers").read_text(encoding="utf-8").split():
                        return None
                    # v2 forbids controllers below a group that holds processes (except the root group), and
                    # the server's own group holds the server: go beside it instead.
                    return (own if own == Path(point) else own.parent), True
    return None


def _sweep(parent: Path) -> None:
    """Remove groups left by servers that died without cleaning up (their pid no longer runs)."""
    for stale in parent.glob(_PREFIX + "*"):
        pid = stale.name.removeprefix(_PREFIX)
        if pid.isdigit() and not Path("/proc", pid).exists():
            _remove_tree(stale)


def _remove_tree(group: Path) -> None:
    for child in group.iterdir():
        if child.is_dir():
            with contextlib.suppress(OSError):
                child.rmdir()
    with contextlib.suppress(OSError):
        group.rmdir()


@dataclass(frozen=True, slots=True)
class PidsCgroup:
    """This server's own group of per-call pids cgroups."""

    base: Path
    """`mcp-harness-<server pid>`, a sibling or child of the server's cgroup; each call gets a subgroup."""

    @classmethod
    def create(cls) -> PidsCgroup | None:
        """Set up the server's group, or None when this host gives no writable pids cgroup. Blocking."""
        try:
            found = _groups_parent()
            if found is None:
                return None
            parent, v2 = found
            _sweep(parent)
            base = parent / f"{_PREFIX}{os.getpid()}"
            if v2 and "pids" not in (parent / "cgroup.subtree_control").read_text(encoding="utf-8").split():
                (parent / "cgroup.subtree_control").write_text("+pids", encoding="ascii")
            base.mkdir(exist_ok=True)
            if v2:
                (base / "cgroup.subtree_control").write_text("+pids", encoding="ascii")
            group = cls(base)
            probe = group.enter(4)
            group.leave(probe)
            return group
        except OSError as exc:
            logger.info("No writable pids cgroup (%s); process limits fall back to RLIMIT_NPROC", exc)
            return None

    def enter(self, max_tasks: int) -> Path:
        """A fresh subgroup for one call, limited to `max_tasks` plus bwrap's own; returns its `cgroup.procs`."""
        call = self.base / f"call-{next(_calls)}"
        call.mkdir()
        try:
            (call / "pids.max").write_text(str(max_tasks + CGROUP_OVERHEAD), encoding="ascii")
        except OSError:
            call.rmdir()
            raise
        return call / "cgroup.procs"

    def leave(self, procs: Path) -> None:
        """Remove a call's subgroup once its tasks are gone (they exit just after bwrap does). Blocking, brief."""
        for delay in (0, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5):
            time.sleep(delay)
            try:
                procs.parent.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                continue
        logger.warning("Sandbox cgroup %s still busy; it is removed when the server exits", procs.parent)

    def close(self) -> None:
        """Remove the server's group and any call subgroups left in it. Blocking."""
        if self.base.exists():
            _remove_tree(self.base)


def launcher(procs: Path | None) -> list[str]:
    """The argv prefix that joins the call's cgroup (when there is one) and then becomes bwrap by `exec`."""
    if procs is None:
        return []
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]
