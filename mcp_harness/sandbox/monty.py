"""Script children's interpreter: Monty (`pydantic-monty`), a Python subset that suspends at every external call
(HARNESS §9, DESIGN §6).

This module knows the script's shape and the interpreter; the durable part (journal, replay, parking) is
`mcp_harness.runs.script`. A script is a module defining `def main(ctx)`. The host appends a small prelude after the
source (so the script's line numbers are its own) that builds `ctx` and calls `main(ctx)`; every `ctx` method is one
call of the external function `_harness_op`, which suspends the interpreter and hands the host `(op, *args)`.
The host answers with `{"ok": True, "value": …}` or `{"ok": False, "error": "<code>: <message>"}`, and the prelude
raises the latter as a `RuntimeError` inside the script (Monty has no user-defined exception classes).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

MAX_SOURCE_BYTES = 256 * 1024
FUEL_S = 2.0
"""Pure compute allowed per slice, i.e. between two host round trips (exceeding it → `fuel-exhausted`)."""
MAX_MEMORY = 64 * 1024 * 1024
MAX_RECURSION = 200
MAX_SUSPENSIONS = 20_000
"""Monty's own cap on external calls per execution; above the journal's 5 000 entries so the journal cap speaks."""
SCRIPT_NAME = "script.py"
EXTERNAL = "_harness_op"
RESERVED_PREFIX = "_harness"

FORBIDDEN_CALLS = {
    "open": "open( — scripts have no files; use ctx.call('read', …) / ctx.call('write', …)",
    "eval": "eval( — scripts cannot evaluate code",
    "exec": "exec( — scripts cannot execute code",
    "compile": "compile( — scripts cannot compile code",
    "__import__": "__import__ — scripts cannot import modules",
    "input": "input( — scripts have no console; use ctx.input",
    "breakpoint": "breakpoint( — scripts have no debugger",
    "globals": "globals( — scripts cannot reach the interpreter's namespace",
}
NONDETERMINISTIC = {
    "random": "random — a replayed script must make the same choices; take randomness from ctx.input",
    "time": "time — use ctx.now(), which replay answers with the same value, and ctx.sleep(ms) to wait",
    "datetime": "datetime — use ctx.now(), which replay answers with the same value",
    "uuid": "uuid — mint ids with ctx.now() and ctx.run_id, or take them from ctx.input",
    "secrets": "secrets — a replayed script must make the same choices",
    "os": "os — scripts have no operating system; use ctx.call",
    "sys": "sys — scripts have no interpreter access",
}

PRELUDE = f"""

def _harness_unwrap(r):
    if r["ok"]:
        return r["value"]
    raise RuntimeError(r["error"])


class _HarnessCtx:
    def __init__(self, input, run_id):
        self.input = input
        self.run_id = run_id

    def call(self, tool, input=None):
        return _harness_unwrap({EXTERNAL}("call", tool, input))

    def delegate(self, spec):
        return _harness_unwrap({EXTERNAL}("delegate", spec))

    def agent(self, spec):
        return _harness_unwrap({EXTERNAL}("delegate", spec))

    def now(self):
        return _harness_unwrap({EXTERNAL}("now"))

    def log(self, level, message, data=None):
        return _harness_unwrap({EXTERNAL}("log", level, message, data))

    def plan(self, steps, title=None):
        return _harness_unwrap({EXTERNAL}("plan", steps, title))

    def sleep(self, ms):
        return _harness_unwrap({EXTERNAL}("sleep", ms))

    def wait_for_event(self, signal=None, timeout_ms=None, match=None, label=None):
        return _harness_unwrap({EXTERNAL}("wait", signal, timeout_ms, match, label))

    def continue_as_new(self, input=None):
        _harness_unwrap({EXTERNAL}("continue", input))
        raise RuntimeError("continue_as_new returned")

    def minutes(self, n):
        return n * 60000

    def hours(self, n):
        return n * 3600000

    def step(self, label, fn):
        _harness_unwrap({EXTERNAL}("step", label, "start"))
        try:
            value = fn()
        except Exception:
            {EXTERNAL}("step", label, "end", False)
            raise
        _harness_unwrap({EXTERNAL}("step", label, "end", True))
        return value

    def parallel(self, thunks):
        settled = _harness_settle(thunks, False)
        for r in settled:
            if not r[0]:
                raise r[1]
        return [r[1] for r in settled]

    def parallel_settled(self, thunks):
        out = []
        for r in _harness_settle(thunks, True):
            if r[0]:
                out.append({{"ok": True, "value": r[1]}})
            else:
                text = str(r[1])
                code = text.split(": ", 1)[0] if ": " in text and isinstance(r[1], RuntimeError) else "workflow-error"
                out.append({{"ok": False, "error": {{"code": code, "message": text}}}})
        return out

    def delegate_all(self, specs):
        return self.parallel([_harness_delegating(self, spec) for spec in specs])


def _harness_settle(thunks, settle_all):
    thunks = list(thunks)
    _harness_unwrap({EXTERNAL}("parallel", "begin", len(thunks)))
    settled = []
    for thunk in thunks:
        _harness_unwrap({EXTERNAL}("parallel", "thunk"))
        try:
            settled.append((True, thunk()))
        except Exception as e:
            settled.append((False, e))
    failed = [not r[0] for r in settled]
    waiting = _harness_unwrap({EXTERNAL}("parallel", "end", failed, settle_all))
    return [r for r, w in zip(settled, waiting) if not w]


def _harness_delegating(ctx, spec):
    def thunk():
        return ctx.delegate(spec)
    return thunk


main(_HarnessCtx(_harness_input, _harness_run_id))
"""


def program(source: str) -> str:
    """What the interpreter runs: the script, then the prelude (which calls `main`)."""
    return source.rstrip("\n") + "\n" + PRELUDE


def lint_script(source: str) -> list[str]:
    """Reasons to refuse a script before it runs (the Python analog of HARNESS §9.1); empty when it is fine.

    Refused: over 256 KiB; not parseable; no top-level `def main(ctx)` (exactly one, synchronous, one parameter);
    `import`/`from … import` anywhere; calls of open/eval/exec/compile/__import__/input/breakpoint/globals; attribute
    use of the nondeterministic or host modules random, time, datetime, uuid, secrets, os, sys (`time.time()`:
    unreachable without an import, but named so the author learns why); names starting `_harness` (the prelude's).
    """
    problems: list[str] = []
    size = len(source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        return [f"source is {size} bytes; the limit is {MAX_SOURCE_BYTES} (256 KiB)"]
    try:
        tree = ast.parse(source, filename=SCRIPT_NAME)
    except SyntaxError as exc:
        return [f"line {exc.lineno}: syntax error: {exc.msg}"]
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "main"]
    if not mains:
        problems.append("the script must define `def main(ctx):` at top level; it is called with the ctx object")
    elif len(mains) > 1:
        problems.append("define `main` once")
    else:
        main = mains[0]
        if isinstance(main, ast.AsyncFunctionDef):
            problems.append(f"line {main.lineno}: define `def main(ctx):`, not `async def` — ctx calls are synchronous")
        elif len(main.args.args) != 1 or main.args.vararg or main.args.kwarg or main.args.kwonlyargs:
            problems.append(f"line {main.lineno}: `main` takes exactly one parameter, the ctx object")
    seen: set[str] = set()

    def once(message: str) -> None:
        if message not in seen:
            seen.add(message)
            problems.append(message)

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            once(f"line {line}: import statements are not allowed — everything a script may use is on ctx")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            once(f"line {line}: {FORBIDDEN_CALLS[node.func.id]}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in NONDETERMINISTIC:
            once(f"line {line}: {NONDETERMINISTIC[node.value.id]}")
        elif isinstance(node, ast.Name | ast.FunctionDef | ast.ClassDef | ast.arg):
            name = node.arg if isinstance(node, ast.arg) else node.id if isinstance(node, ast.Name) else node.name
            if name.startswith(RESERVED_PREFIX):
                once(f"line {line}: names starting with {RESERVED_PREFIX} are reserved")
    if re.search(r"\b__import__\b", source) and not any("__import__" in p for p in problems):
        problems.append("__import__ — scripts cannot import modules")
    return problems


@dataclass(frozen=True, slots=True)
class ScriptError:
    """An uncaught exception of the script, located in the script's own lines."""

    kind: str
    """The exception type name (`ZeroDivisionError`, `RuntimeError`, `TimeoutError`, …)."""
    message: str
    line: int | None
    source_line: str | None

    def describe(self) -> str:
        where = f" (script.py line {self.line}: {self.source_line.strip()})" if self.line and self.source_line else ""
        return f"{self.kind}: {self.message}{where}"


def script_error(exc: Any, source_lines: int) -> ScriptError:
    """Read a `MontyRuntimeError`/`MontySyntaxError`: its type, message and innermost frame within the script."""
    inner = exc.exception()
    kind = type(inner).__name__
    message = str(inner) if str(inner) else exc.display("msg")
    line: int | None = None
    text: str | None = None
    try:
        frames = list(exc.traceback())
    except Exception:  # a syntax error may carry no frames
        frames = []
    for frame in frames:
        if 0 < frame.line <= source_lines:
            line, text = frame.line, frame.source_line
    return ScriptError(kind=kind, message=message, line=line, source_line=text)


def limits(fuel_s: float = FUEL_S) -> dict[str, Any]:
    """Monty's resource limits for one execution (a `ResourceLimits`)."""
    return {
        "max_turn_duration_secs": fuel_s,
        "max_memory": MAX_MEMORY,
        "max_recursion_depth": MAX_RECURSION,
        "max_suspensions": MAX_SUSPENSIONS,
        "max_total_sleep_secs": 0.0,
    }


__all__ = ["FUEL_S", "MAX_SOURCE_BYTES", "PRELUDE", "ScriptError", "limits", "lint_script", "program", "script_error"]
