"""The `plan` verb: the session's visible checklist (HARNESS §7.1). Whole replacement; no transcript event."""

from __future__ import annotations

from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.store._util import now_ms
from mcp_harness.verbs.base import VerbContext, VerbResult

MAX_PLAN_STEPS = 100
MAX_LABEL_CHARS = 200
STATUSES = ("pending", "running", "done", "failed", "skipped")
TERMINAL = ("done", "failed", "skipped")


def normalize_plan(raw: object) -> dict[str, Any]:
    """Keep only `title` and `{id, label, status}` steps; runtime marks (`resolvedBy`, …) never come from input."""
    if not isinstance(raw, dict):
        return {"steps": []}
    src: dict[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
    steps_in = src.get("steps")
    items: list[Any] = list(steps_in) if isinstance(steps_in, list) else []  # pyright: ignore[reportUnknownArgumentType]
    steps: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            item = {"label": item}
        if not isinstance(item, dict):
            continue
        if len(steps) == MAX_PLAN_STEPS:
            break
        index = len(steps) + 1
        step_id = item.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        label = item.get("label")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        status = item.get("status")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        steps.append(
            {
                "id": step_id if isinstance(step_id, str) and step_id else f"step-{index}",
                "label": label[:MAX_LABEL_CHARS] if isinstance(label, str) and label else f"Step {index}",
                "status": status if status in STATUSES else "pending",
            }
        )
    plan: dict[str, Any] = {"steps": steps}
    title = src.get("title")
    if isinstance(title, str) and title:
        plan["title"] = title[:MAX_LABEL_CHARS]
    return plan


def _settled(plan: dict[str, Any] | None) -> bool:
    steps = plan.get("steps", []) if plan else []
    return bool(steps) and all(s["status"] in TERMINAL for s in steps)


def settle(previous: dict[str, Any] | None, plan: dict[str, Any], owner_run_id: str | None) -> dict[str, Any]:
    """Carry runtime marks from the previous plan and stamp `ownerRunId` and `settledAt` (HARNESS §7.1)."""
    before = {s["id"]: s for s in (previous or {}).get("steps", [])}
    for step in plan["steps"]:
        old = before.get(step["id"])
        if old and old.get("resolvedBy") == "runtime" and old["status"] == "done" and step["status"] == "done":
            step["resolvedBy"] = "runtime"
    same_ids = [s["id"] for s in (previous or {}).get("steps", [])] == [s["id"] for s in plan["steps"]]
    if previous and _settled(previous) and _settled(plan) and same_ids and "ownerRunId" in previous:
        owner_run_id = previous["ownerRunId"]
    if owner_run_id is not None:
        plan["ownerRunId"] = owner_run_id
    if _settled(plan):
        kept = previous.get("settledAt") if previous and _settled(previous) else None
        same_owner = previous is not None and previous.get("ownerRunId") == plan.get("ownerRunId")
        plan["settledAt"] = kept if kept is not None and same_owner else now_ms()
    return plan


def running_step(plan: dict[str, Any] | None) -> dict[str, Any] | None:
    """The one `running` step children attach to (HARNESS §7.3); None unless exactly one is running."""
    running = [s for s in (plan or {}).get("steps", []) if s.get("status") == "running"]
    return running[0] if len(running) == 1 else None


def mark_done_by_runtime(plan: dict[str, Any], step_id: str) -> dict[str, Any] | None:
    """The plan with `step_id` done and marked `resolvedBy: runtime`, or None when the step is gone or terminal."""
    steps = [dict(s) for s in plan.get("steps", [])]
    for step in steps:
        if step["id"] == step_id and step["status"] not in TERMINAL:
            step["status"], step["resolvedBy"] = "done", "runtime"
            return {**plan, "steps": steps}
    return None


def plan(ctx: VerbContext, arguments: dict[str, Any]) -> VerbResult:
    """Replace the session's checklist."""
    if ctx.session_id is None:
        raise BadRequest("plan needs a conversation to attach the checklist to.")
    ids = [step.get("id") for step in arguments.get("steps") or []]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise BadRequest(f"plan step ids must be unique; repeated: {', '.join(repeated)}.")
    sessions = ctx.services.sessions
    new = settle(sessions.get_plan(ctx.session_id), normalize_plan(arguments), owner_run_id=ctx.run_id)
    sessions.set_plan(ctx.session_id, new)
    count = len(new["steps"])
    summary = f"Plan saved ({count} step{'s' if count != 1 else ''})."
    return VerbResult.of({"ok": True, "steps": count, "summary": summary}, plan_markdown(new))


def plan_markdown(plan: dict[str, Any]) -> str:
    marks = {"pending": "[ ]", "running": "[~]", "done": "[x]", "failed": "[!]", "skipped": "[-]"}
    lines = [f"# {plan['title']}", ""] if plan.get("title") else []
    lines += [f"- {marks[s['status']]} {s['id']} · {s['label']} · {s['status']}" for s in plan.get("steps", [])]
    return "\n".join(lines)
