"""Authored lambdas run in the execute sandbox with the ABI of HARNESS §4.

The input travels embedded in the program as a JSON string literal; the result comes back as one stdout line that
starts with the marker, found by scanning from the end so that anything the tool printed stays in `logs`.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from mcp_harness.callables.documents import ToolDocument
from mcp_harness.callables.execute import changed_json, changed_note
from mcp_harness.errors import HarnessError
from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.schema_subset import value_errors


class ToolFailed(HarnessError):
    """An authored tool ran and failed: its code raised or exited non-zero, hit its time limit, returned no value, or
    returned one its own output schema rejects.

    That is the tool's fault, not a bad request by its caller, so it is not a 400 (which the CLI reports as a usage
    error): like a gateway whose backend function crashed, it is a 502, with its own code so callers can tell it
    from a remote service failing.
    """

    status = 502
    code = "tool-failed"


RESULT_MARKER = "__SEED_TOOL_RESULT__"
"""The reference's `LAMBDA_RESULT_PREFIX`, kept so tools move between the two unchanged."""

_PYTHON_EPILOGUE = """

import json as _mh_json
_mh_main = globals().get("main")
if not callable(_mh_main):
    raise SystemExit("Tool source must define a top-level callable main(input).")
_mh_result = _mh_main(_mh_json.loads({literal}))
if hasattr(_mh_result, "__await__"):  # asyncio costs ~70 ms to import, so only async tools pay for it
    import asyncio as _mh_asyncio
    async def _mh_await(value):
        return await value
    _mh_result = _mh_asyncio.run(_mh_await(_mh_result))
print({marker!r} + _mh_json.dumps(_mh_result))
"""

_TS_PROGRAM = """const mod = await import("data:text/typescript;base64,{source}");
if (typeof mod.default !== "function") throw new Error("Tool source must export a default function.");
const result = await mod.default(JSON.parse({literal}));
console.log({marker} + JSON.stringify(result ?? null));
"""


def program(doc: ToolDocument, runtime: str, tool_input: dict[str, Any]) -> str:
    literal = json.dumps(json.dumps(tool_input))
    if runtime == "python":
        return (doc.source or "") + _PYTHON_EPILOGUE.format(literal=literal, marker=RESULT_MARKER)
    source = base64.b64encode((doc.source or "").encode("utf-8")).decode("ascii")
    return _TS_PROGRAM.format(source=source, literal=literal, marker=json.dumps(RESULT_MARKER))


def parse_result(stdout: str) -> tuple[bool, Any, str]:
    """(found, value, logs): the last marker line's JSON, and every other line as logs."""
    lines = stdout.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith(RESULT_MARKER):
            try:
                value = json.loads(lines[i][len(RESULT_MARKER) :])
            except json.JSONDecodeError:
                return False, None, stdout.strip()
            return True, value, "\n".join(lines[:i] + lines[i + 1 :]).strip()
    return False, None, stdout.strip()


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


async def run(ctx: VerbContext, doc: ToolDocument, runtime: str, tool_input: dict[str, Any]) -> VerbResult:
    outcome = await ctx.services.sandbox.run(
        runtime, program(doc, runtime, tool_input), workspace=ctx.agent.memory_dir, on_output=ctx.progress
    )
    found, value, logs = parse_result(outcome.stdout)
    if outcome.timed_out:
        raise ToolFailed(f"Tool {doc.name} failed: it was stopped at its time limit.\n{_tail(outcome.stderr or logs)}")
    if outcome.exit_code != 0:
        raise ToolFailed(f"Tool {doc.name} failed (exit {outcome.exit_code}).\n{_tail(outcome.stderr or logs)}")
    if not found:
        hint = (
            "main(input) must return a JSON-serializable value"
            if runtime == "python"
            else ("the default export must return a JSON-serializable value")
        )
        cut = " (its output was cut at 64 KiB, which loses the result line)" if outcome.truncated else ""
        raise ToolFailed(f"Tool {doc.name} finished without returning a value{cut}: {hint}.")
    if doc.output is not None:
        errors = value_errors(doc.output, value)
        if errors:
            raise ToolFailed(f"Tool {doc.name} returned a value its own output schema rejects: {'; '.join(errors)}.")
    summary = f"Ran {doc.name} ({outcome.duration_ms}ms{changed_note(outcome)})."
    data: dict[str, Any] = {"summary": summary, "result": value}
    if logs:
        data["logs"] = logs
    if outcome.changed_files:
        data["changedFiles"] = changed_json(outcome)
    data["durationMs"] = outcome.duration_ms
    body = f"{summary}\n\n```json\n{json.dumps(value, indent=2, ensure_ascii=False)}\n```"
    if logs:
        body += f"\n\nlogs:\n```\n{logs}\n```"
    return VerbResult(data, body)
