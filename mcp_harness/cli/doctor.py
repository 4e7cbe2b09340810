"""`mcp-harness doctor`: can this host run the sandbox, with which runtimes, is the data dir usable, and the
database's state (`cli/doctor_db.py`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from mcp_harness.cli._common import command_flags, emit, settings_of


def register(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor", help="check the code sandbox (bubblewrap), its runtimes, the data dir and the database"
    )
    doctor.set_defaults(handler=_doctor_command)
    command_flags(doctor)


def _data_dir_state(path: Path) -> tuple[bool, str]:
    """Whether `path` is, or can be created as, a writable directory, and a few words saying so."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False, "no existing parent directory"
        probe = probe.parent
    if not probe.is_dir():
        return False, f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return False, f"{probe} is not writable"
    return True, "writable" if probe == path else "writable; created on first use"


def _monty_state() -> tuple[bool, str, str]:
    """Whether script children can run: the Monty worker starts and evaluates an expression."""
    try:
        from pydantic_monty import Monty

        with Monty() as pool, pool.checkout() as session:
            answer = session.feed_run("6 * 7")
    except Exception as exc:  # a top-level check: any failure to start the worker is the answer it gives
        reason = f"{type(exc).__name__}: {exc}"
        return False, "scripts", f"the Monty worker does not run ({reason}); reinstall pydantic-monty"
    return answer == 42, "scripts", "Monty runs script children" if answer == 42 else f"Monty answered {answer!r}"


def _doctor_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.sandbox import Sandbox

    settings = settings_of(args)
    sandbox = Sandbox(settings.sandbox)
    probe = sandbox.check()
    checks: list[dict[str, Any]] = []

    def line(ok: bool | None, label: str, text: str) -> None:
        checks.append({"check": label, "ok": ok, "detail": text})

    layout = probe.layout
    if layout is None:
        line(False, "bubblewrap", probe.reason or "not usable")
    else:
        line(True, "bubblewrap", f"{layout.bwrap} (version {probe.bwrap_version or 'unknown'})")
        if probe.reason is None:
            line(True, "sandbox", f"a probe sandbox runs; processes bounded by {probe.process_limit}")
        else:
            line(False, "sandbox", probe.reason)
    runtimes = sandbox.runtimes
    line(bool(runtimes), "runtimes", ", ".join(runtimes) or "none")
    if layout is not None:
        if layout.python is None:
            line(
                False,
                "python",
                f"{settings.sandbox.python} is missing or outside the system directories the "
                "sandbox mounts (/usr, /bin, /lib); set [sandbox] python to a system interpreter",
            )
        ts = f"{layout.ts.name} ({layout.ts.host_path})" if layout.ts else "none (install bun, deno or node >= 22.6)"
        line(None if layout.ts is None else True, "typescript", ts)
    line(None, "network", "on: sandboxed code can reach the network" if settings.sandbox.network else "off")
    line(*_monty_state())
    writable, state = _data_dir_state(settings.data_dir)
    line(writable, "data dir", f"{settings.data_dir} ({state})")
    from mcp_harness.cli.doctor_db import database_checks

    database_checks(settings, line)
    good = all(c["ok"] is not False for c in checks)
    lines = [f"[{'ok' if c['ok'] else '--' if c['ok'] is None else '!!'}] {c['check']}: {c['detail']}" for c in checks]
    lines.append("All good." if good else "Some checks failed; see the lines marked [!!].")
    emit(out, args, {"ok": good, "checks": checks}, "\n".join(lines))
    return 0 if good else 1
