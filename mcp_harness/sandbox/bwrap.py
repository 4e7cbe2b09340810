"""`Sandbox`: runs one program per call in a fresh bubblewrap sandbox over the agent's memory (DESIGN §6).

A call is: snapshot the workspace and open the call's pids cgroup (one worker-thread hop), start
`[sh -c 'join cgroup; exec'] bwrap … -- prlimit … -- <runtime> <code>`, drain stdout and stderr into capped
buffers while reporting progress, kill at the deadline, then remove the cgroup and snapshot again (one more hop).

Killing is by SIGKILL to bwrap's process group. bwrap runs the code in its own pid namespace under an init that has
`--die-with-parent`; when bwrap dies, that init dies, and the kernel kills everything left in the namespace, so
double-forked children and programs that ignore SIGTERM go too. The same happens when the program's main process
exits on its own: nothing it started in the background outlives the call.

Exit codes: the program's own; 128+N when it was killed by signal N (bwrap's convention), so 137 after a timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread
from anyio.abc import ByteSendStream, Process

from mcp_harness.config import SandboxSettings
from mcp_harness.errors import BadRequest
from mcp_harness.sandbox.capture import Capped, Tail, pump, report_progress
from mcp_harness.sandbox.changes import FileChange, Signature, diff, snapshot
from mcp_harness.sandbox.command import CODE_DIR, ENV, SHELL, HostLayout, bwrap_argv, limits_argv
from mcp_harness.sandbox.limits import launcher
from mcp_harness.sandbox.probe import Probe, probe_host

logger = logging.getLogger(__name__)

RUNTIMES = ("ts", "python", "shell")
"""Every runtime the sandbox knows, in the order they are offered."""
MIN_TIMEOUT_SECS, MAX_TIMEOUT_SECS = 1, 300
INLINE_CODE_MAX = 100_000
"""Bytes of code passed as one argument (`-c`); the kernel refuses single arguments over 128 KiB."""
DRAIN_GRACE_SECS = 2.0
"""How long to wait for the pipes to close after bwrap exits (they close at once: the pid namespace is gone)."""

OnOutput = Callable[[str], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ExecOutcome:
    """What one sandboxed run did."""

    exit_code: int
    """The program's exit code; 128+N if signal N killed it (137 after a timeout)."""
    stdout: str
    """UTF-8 (undecodable bytes replaced), the first 64 KiB."""
    stderr: str
    """Same as `stdout`."""
    truncated: bool
    """Either stream was longer than 64 KiB."""
    duration_ms: int
    timed_out: bool
    changed_files: list[FileChange]
    """Workspace entries added, modified or removed, sorted by path."""


def clamp_timeout(timeout_secs: int | None, default: int) -> int:
    """The wall-clock limit of a call: `default` when none is given, clamped to [1, 300] seconds."""
    return min(max(default if timeout_secs is None else timeout_secs, MIN_TIMEOUT_SECS), MAX_TIMEOUT_SECS)


def _kill(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


async def _feed(stdin: ByteSendStream, data: bytes) -> None:
    try:
        await stdin.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the program exited, or closed stdin, before reading all of its code: its exit code tells
    finally:
        await stdin.aclose()


class Sandbox:
    """Runs code in bubblewrap. Probes the host once, on first use; `await probe()` does that off the event loop."""

    def __init__(self, settings: SandboxSettings) -> None:
        self._settings = settings
        self._probe: Probe | None = None
        self._lock = threading.Lock()

    def check(self) -> Probe:
        """The probe result, probing now if needed. Blocking on first use (a few milliseconds)."""
        with self._lock:
            if self._probe is None:
                self._probe = probe_host(self._settings)
                if self._probe.reason:
                    logger.warning("Sandbox unavailable: %s", self._probe.reason)
            return self._probe

    async def probe(self) -> None:
        """Probe the host on a worker thread, so that later property reads do not block the event loop."""
        await anyio.to_thread.run_sync(self.check)

    @property
    def available(self) -> bool:
        """bwrap is installed and a trivial sandboxed command works."""
        return self.check().reason is None

    @property
    def runtimes(self) -> tuple[str, ...]:
        """The runtimes offered, in the order of `RUNTIMES`; () when the sandbox is unavailable."""
        probe = self.check()
        if probe.reason is not None or probe.layout is None:
            return ()
        has = {"ts": probe.layout.ts is not None, "python": probe.layout.python is not None, "shell": True}
        return tuple(r for r in RUNTIMES if has[r])

    def unavailable_reason(self) -> str | None:
        """Why the sandbox cannot run here, for `doctor` and refusals; None when it can."""
        return self.check().reason

    def _program(self, layout: HostLayout, runtime: str, code: str) -> tuple[list[str | bytes], bytes | None, bool]:
        """(argv, bytes for stdin, whether the code goes in a file instead)."""
        data = code.encode("utf-8", "replace")
        inline = len(data) <= INLINE_CODE_MAX and b"\0" not in data
        if runtime == "python":
            assert layout.python is not None
            # Both forms keep Python's own `-c` behaviour: sys.path[0] is the working directory, /workspace.
            return ([layout.python, b"-c", data], None, False) if inline else ([layout.python, "-"], data, False)
        if runtime == "shell":
            if not inline:
                raise BadRequest(
                    f"Shell code is limited to {INLINE_CODE_MAX} bytes without NUL characters; write longer scripts "
                    "to a memory file and run that (`sh script.sh`)."
                )
            return [SHELL, b"-c", data], None, False
        assert layout.ts is not None
        return [*layout.ts.argv, f"{CODE_DIR}/main.mts"], None, True

    async def run(
        self,
        runtime: str,
        code: str,
        *,
        workspace: Path,
        timeout_secs: int | None = None,
        on_output: OnOutput | None = None,
    ) -> ExecOutcome:
        """Run `code` with `runtime` in a fresh sandbox whose `/workspace` is `workspace`.

        `on_output` receives the last ~2 KiB of combined output, at most four times a second, while it runs.

        Raises:
            BadRequest: the sandbox cannot run here or could not start (the message says why and how to fix it),
                the runtime is not one this host offers, or shell code is too long to pass inline.
        """
        probe = self._probe or await anyio.to_thread.run_sync(self.check)
        if probe.reason is not None or probe.layout is None:
            raise BadRequest(f"Code cannot run on this server: {probe.reason}. `mcp-harness doctor` checks the host.")
        offered = self.runtimes
        if runtime not in offered:
            raise BadRequest(f"Unknown runtime {runtime!r}; this server runs: {', '.join(offered)}.")
        layout, cgroup = probe.layout, probe.cgroup
        timeout = clamp_timeout(timeout_secs, self._settings.default_timeout_secs)
        program, stdin_data, as_file = self._program(layout, runtime, code)
        workspace = Path(workspace)
        max_tasks = self._settings.max_processes

        def prepare() -> tuple[dict[str, Signature], Path | None]:
            workspace.mkdir(parents=True, exist_ok=True)
            return snapshot(workspace), (cgroup.enter(max_tasks) if cgroup is not None else None)

        before: dict[str, Signature] = {}
        procs: Path | None = None
        with anyio.CancelScope(shield=True):  # brief, and what it creates is only released below
            before, procs = await anyio.to_thread.run_sync(prepare)
        code_fd = os.memfd_create("sandbox-code") if as_file else None
        try:
            if code_fd is not None:
                # A memfd is RAM: writing it never waits on a disk.
                os.write(code_fd, code.encode("utf-8", "replace"))
                os.lseek(code_fd, 0, os.SEEK_SET)
            argv: list[str | bytes] = [*launcher(procs), *bwrap_argv(layout, self._settings, workspace, code_fd)]
            argv += [*limits_argv(layout, self._settings, runtime), *program]
            exit_code, out, err, duration_ms, timed_out = await _supervise(
                argv, code_fd, stdin_data, timeout, on_output
            )
        except BaseException:
            if cgroup is not None and procs is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(cgroup.leave, procs)
            raise
        finally:
            if code_fd is not None:
                os.close(code_fd)

        def finish() -> dict[str, Signature]:
            if cgroup is not None and procs is not None:
                cgroup.leave(procs)
            return snapshot(workspace)

        after = await anyio.to_thread.run_sync(finish)
        return ExecOutcome(
            exit_code=exit_code,
            stdout=out.text(),
            stderr=err.text(),
            truncated=out.truncated or err.truncated,
            duration_ms=duration_ms,
            timed_out=timed_out,
            changed_files=diff(before, after),
        )


async def _supervise(
    argv: list[str | bytes], code_fd: int | None, stdin_data: bytes | None, timeout: int, on_output: OnOutput | None
) -> tuple[int, Capped, Capped, int, bool]:
    """Start `argv`, drain its output, kill it at the deadline: (exit code, stdout, stderr, ms, timed out)."""
    out, err, tail = Capped(), Capped(), Tail()
    timed_out = False
    duration_ms = 0
    start = time.monotonic()
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            env=ENV,
            start_new_session=True,
            pass_fds=() if code_fd is None else (code_fd,),
        )
    except OSError as exc:
        raise BadRequest(f"The sandbox could not start: {exc}. `mcp-harness doctor` checks the host.") from exc
    try:
        assert process.stdout is not None and process.stderr is not None
        async with anyio.create_task_group() as watchers:
            if on_output is not None:
                watchers.start_soon(report_progress, tail, on_output)
            async with anyio.create_task_group() as io:
                io.start_soon(pump, process.stdout, out, tail)
                io.start_soon(pump, process.stderr, err, tail)
                if stdin_data is not None and process.stdin is not None:
                    io.start_soon(_feed, process.stdin, stdin_data)
                with anyio.move_on_after(timeout) as deadline:
                    await process.wait()
                if deadline.cancelled_caught:
                    timed_out = True
                    _kill(process)
                    await process.wait()
                duration_ms = int((time.monotonic() - start) * 1000)
                io.cancel_scope.deadline = anyio.current_time() + DRAIN_GRACE_SECS
            watchers.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                _kill(process)
            with anyio.move_on_after(DRAIN_GRACE_SECS * 2):
                await process.aclose()
    code = process.returncode if process.returncode is not None else -signal.SIGKILL
    return (128 - code if code < 0 else code), out, err, duration_ms, timed_out
