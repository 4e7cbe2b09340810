"""The `execute` callable: code in a fresh bubblewrap sandbox over the agent's memory (HARNESS §5, DESIGN §6).

Its contract names every runtime; a host serves it `narrowed` to the runtimes its sandbox offers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from mcp_harness.verbs.base import VerbContext, VerbResult
from mcp_harness.verbs.spec import VerbSpec

if TYPE_CHECKING:
    from mcp_harness.sandbox import ExecOutcome

RUNTIMES = ("ts", "python", "shell")
"""`execute`'s runtimes, in contract order; a host serves the ones it offers (`narrowed`)."""
_RUNTIME_NAMES = {"ts": "TypeScript", "python": "Python", "shell": "shell"}
_RUNTIME_HOW = {
    "ts": '"ts" runs TypeScript',
    "python": '"python" runs it with the system python interpreter',
    "shell": '"shell" runs it with sh',
}


def _either(words: list[str]) -> str:
    """`a`, `a or b`, `a, b, or c`."""
    if len(words) <= 2:
        return " or ".join(words)
    return ", ".join(words[:-1]) + ", or " + words[-1]


def execute_description(runtimes: tuple[str, ...] | list[str]) -> str:
    """`execute`'s description, naming only `runtimes` (the ones the serving host offers)."""
    names = _either([_RUNTIME_NAMES[r] for r in RUNTIMES if r in runtimes])
    return (
        f"Run {names} code in an isolated sandbox with your persistent memory mounted at /workspace, which is also "
        "the working directory. Files your code reads and writes under /workspace are the same files as your "
        "~/memory addresses, so use this to process, transform, analyze, or generate memory files — parse data, "
        "convert formats, run computations, and save results. Each call runs in a fresh sandbox (a bubblewrap "
        "namespace: read-only system directories, a private /tmp, no other files of the host): no state "
        "(variables, processes, /tmp) survives between calls, so persist anything important as files under "
        "/workspace. Network access is off unless the server's owner turned it on, and CPU time, memory, processes "
        "and file sizes are limited. Output returns stdout, stderr, the exit code, and which memory files changed."
    )


def runtime_description(runtimes: tuple[str, ...] | list[str]) -> str:
    """The `runtime` property's description for `runtimes`."""
    return "How to run the code: " + ", ".join(_RUNTIME_HOW[r] for r in RUNTIMES if r in runtimes) + "."


EXECUTE = VerbSpec(
    name="execute",
    title="Execute Code",
    destructive=True,
    open_world=True,
    description=execute_description(RUNTIMES),
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "runtime": {
                "type": "string",
                "enum": list(RUNTIMES),
                "description": runtime_description(RUNTIMES),
            },
            "code": {"type": "string", "minLength": 1, "description": "The code to execute."},
            "timeout_secs": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional timeout override in seconds, at most 300. Defaults to the server limit (typically 60).",  # noqa: E501 (prose the model reads, one paragraph a line)
            },
        },
        "required": ["runtime", "code"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "exitCode": {"type": "integer"},
            "success": {"type": "boolean"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "truncated": {"type": "boolean", "description": "True when stdout/stderr was cut to the size limit."},
            "durationMs": {"type": "integer"},
            "changedFiles": {
                "type": "array",
                "description": "Memory files added, modified, or removed by the execution.",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "change": {"type": "string", "enum": ["added", "modified", "removed"]},
                    },
                },
            },
        },
    },
)


def narrowed(spec: VerbSpec, runtimes: tuple[str, ...]) -> VerbSpec:
    """`execute`'s contract as a host offering `runtimes` serves it: the runtime enum, the runtime property's
    description and the description's runtime sentence name only what is offered (unchanged if none or all are)."""
    if spec.name != "execute":
        return spec
    declared = spec.input_schema["properties"]["runtime"]["enum"]
    offered = [r for r in declared if r in runtimes]
    if not offered or len(offered) == len(declared):
        return spec
    schema = json.loads(json.dumps(spec.input_schema))
    schema["properties"]["runtime"]["enum"] = offered
    schema["properties"]["runtime"]["description"] = runtime_description(offered)
    return dataclasses.replace(spec, input_schema=schema, description=execute_description(offered))


def changed_json(outcome: ExecOutcome) -> list[dict[str, str]]:
    return [{"path": c.path, "change": c.change} for c in outcome.changed_files]


def changed_note(outcome: ExecOutcome) -> str:
    count = len(outcome.changed_files)
    return f", {count} memory file{'s' if count != 1 else ''} changed" if count else ""


async def execute(ctx: VerbContext, tool_input: dict[str, Any]) -> VerbResult:
    runtime: str = tool_input["runtime"]
    outcome = await ctx.services.sandbox.run(
        runtime,
        tool_input["code"],
        workspace=ctx.agent.memory_dir,
        timeout_secs=tool_input.get("timeout_secs"),
        on_output=ctx.progress,
    )
    summary = f"Ran {runtime} code (exit {outcome.exit_code}, {outcome.duration_ms}ms{changed_note(outcome)})."
    if outcome.timed_out:
        summary += " It was stopped at its time limit."
    data: dict[str, Any] = {
        "summary": summary,
        "exitCode": outcome.exit_code,
        "success": outcome.exit_code == 0 and not outcome.timed_out,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "truncated": outcome.truncated,
        "durationMs": outcome.duration_ms,
        "changedFiles": changed_json(outcome),
    }
    parts = [summary]
    if outcome.stdout:
        parts.append(f"stdout:\n```\n{outcome.stdout}\n```")
    if outcome.stderr:
        parts.append(f"stderr:\n```\n{outcome.stderr}\n```")
    if outcome.truncated:
        parts.append("(output was cut to 64 KiB per stream)")
    if outcome.changed_files:
        parts.append("changed: " + ", ".join(f"{c.path} ({c.change})" for c in outcome.changed_files))
    return VerbResult(data, "\n\n".join(parts))
