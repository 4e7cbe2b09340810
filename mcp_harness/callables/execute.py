"""The `execute` callable: code in a fresh bubblewrap sandbox over the agent's memory (HARNESS §5, DESIGN §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_harness.verbs.base import VerbContext, VerbResult

if TYPE_CHECKING:
    from mcp_harness.sandbox import ExecOutcome


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
