"""The bubblewrap command line: what the sandbox sees of the host, its limits, and how each runtime is started.

The view is deliberately small. System directories are bound read-only (merged-`/usr` links stay links), and of
`/etc` only a fixed list of world-readable, secret-free entries that programs need to start, resolve names, verify
TLS and find `alternatives` links: never `/etc` whole, because a sandbox started by a root server runs as host uid 0
and could otherwise read `shadow`, SSH host keys or `ssl/private`. `/proc` and `/dev` are fresh; `/tmp` and
`/dev/shm` are private tmpfs with a size cap; the root tmpfs and `/dev` are remounted read-only so they cannot
be used as unbounded scratch memory. The agent's memory is the only host directory bound writable.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox.limits import NPROC_OVERHEAD

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_ENTRIES = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki/ca-trust/extracted",
    "pki/tls/certs",
    "protocols",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
)
"""`/etc` entries bound into the sandbox when present. `passwd` and `group` are world-readable and hold no hashes."""
ETC_GLOBS = ("python3*",)
"""Debian's `sitecustomize` and friends live in `/etc/python3.X`."""

WORKDIR = "/workspace"
SHELL = "/bin/sh"
CODE_DIR = "/run/sandbox"
MIB = 1024 * 1024
SHM_BYTES = 64 * MIB
ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "DENO_DIR": "/tmp/.deno",
    "DENO_NO_UPDATE_CHECK": "1",
}
"""The whole environment of sandboxed code. HOME is the private /tmp so tool caches never land in memory; Python
writes no bytecode caches into memory either, and does not buffer, so progress sees output as it is printed."""


@dataclass(frozen=True, slots=True)
class TsRuntime:
    """The TypeScript runtime this host offers."""

    name: str
    """'bun', 'deno' or 'node' (22.6 or later, for its type stripping)."""
    host_path: str
    argv: tuple[str, ...]
    """The command inside the sandbox, before the program file."""


@dataclass(frozen=True, slots=True)
class HostLayout:
    """Everything about the host the command line depends on, found once at probe time."""

    bwrap: str
    prlimit: str
    options: frozenset[str]
    """The optional bwrap flags this version has: `--size` (0.7) and `--disable-userns` (0.8)."""
    mounts: tuple[str, ...]
    """bwrap arguments for system directories, `/etc` entries and the TypeScript runtime binary."""
    python: str | None
    """The system interpreter, when the sandbox can see it."""
    ts: TsRuntime | None


def _inside_system_dirs(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d + "/") for d in map(os.path.realpath, SYSTEM_DIRS) if os.path.isdir(d))


def _system_mounts() -> list[str]:
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    names = list(ETC_ENTRIES) + sorted(
        os.path.relpath(p, "/etc") for pattern in ETC_GLOBS for p in glob.glob(os.path.join("/etc", pattern))
    )
    for name in names:
        path = os.path.join("/etc", name)
        if os.path.islink(path) and _inside_system_dirs(path):
            # Keep links to /usr as links: tools read /etc/localtime's target to learn the zone's name.
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _node_version(path: str) -> tuple[int, int]:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0, 0)
    match = re.match(r"v(\d+)\.(\d+)", out.strip())
    return (int(match[1]), int(match[2])) if match else (0, 0)


def find_ts() -> tuple[TsRuntime | None, list[str]]:
    """The first of bun, deno, node>=22.6 on PATH, and extra mounts when its binary lies outside system dirs."""
    for name in ("bun", "deno", "node"):
        found = shutil.which(name)
        if found is None:
            continue
        real = os.path.realpath(found)
        args: tuple[str, ...]
        if name == "node":
            version = _node_version(real)
            if version < (22, 6):
                continue
            strip = () if version >= (23, 6) else ("--experimental-strip-types",)
            args = (*strip, "--disable-warning=ExperimentalWarning")
        else:
            args = ("run",) if name == "bun" else ("run", "--allow-all", "--no-prompt")
        if _inside_system_dirs(real):
            return TsRuntime(name, real, (real, *args)), []
        inside = f"/run/ts/{name}"
        return TsRuntime(name, real, (inside, *args)), ["--ro-bind", real, inside]
    return None, []


def find_layout(settings: SandboxSettings) -> tuple[HostLayout | None, str | None]:
    """The host layout, or None with the reason the sandbox cannot run here. Blocking (runs `node --version`)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, (
            "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap` (Debian/Ubuntu) or "
            "`dnf install bubblewrap` (Fedora)"
        )
    prlimit = shutil.which("prlimit", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if prlimit is None:
        return None, "prlimit (util-linux) is not installed; the sandbox needs it to set resource limits"
    try:
        usage = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap at {bwrap} does not run: {exc}"
    options = frozenset(flag for flag in ("--size", "--disable-userns") if flag in usage)
    ts, ts_mounts = find_ts()
    python = shutil.which(settings.python)
    if python is not None and not _inside_system_dirs(python):
        python = None
    return HostLayout(bwrap, prlimit, options, (*_system_mounts(), *ts_mounts), python, ts), None


def bwrap_argv(layout: HostLayout, settings: SandboxSettings, workspace: Path, code_fd: int | None) -> list[str]:
    """bwrap and its options up to and including `--`; `code_fd` is bound read-only at `CODE_DIR/main.mts`."""
    argv = [layout.bwrap, "--unshare-all", "--unshare-user"]
    if "--disable-userns" in layout.options:
        # Nested user namespaces are kernel attack surface that no sandboxed program needs.
        argv.append("--disable-userns")
    if settings.network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox", *layout.mounts]
    sized = "--size" in layout.options
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    argv += [*(["--size", str(SHM_BYTES)] if sized else []), "--tmpfs", "/dev/shm"]
    argv += [*(["--size", str(settings.memory_mb * MIB)] if sized else []), "--tmpfs", "/tmp"]
    argv += ["--bind", str(workspace), WORKDIR, "--chdir", WORKDIR]
    if code_fd is not None:
        argv += ["--ro-bind-data", str(code_fd), f"{CODE_DIR}/main.mts"]
    return [*argv, "--remount-ro", "/", "--"]


def limits_argv(layout: HostLayout, settings: SandboxSettings, runtime: str) -> list[str]:
    """prlimit inside the sandbox, so RLIMIT_NPROC counts this call's user namespace only (see `limits`).

    Memory is RLIMIT_AS, except for TypeScript: V8 and JavaScriptCore reserve tens of GiB of address space at start
    (deno will not start under 32 GiB), so there it is RLIMIT_DATA, which counts only writable private memory.
    """
    memory = "--data" if runtime == "ts" else "--as"
    return [
        layout.prlimit,
        f"--cpu={settings.cpu_secs}",
        f"{memory}={settings.memory_mb * MIB}",
        f"--fsize={settings.max_file_mb * MIB}",
        f"--nproc={settings.max_processes + NPROC_OVERHEAD}",
        "--",
    ]
