"""The structuring ctx operations of a script: `ctx.plan`, `ctx.step` and `ctx.parallel` (HARNESS §9.2).

`ctx.parallel(thunks)` is the host half of the prelude's loop (`sandbox/monty.py`): `begin` opens a frame, `thunk`
starts each thunk, `end` closes the frame. A thunk that reached a model child still working (or a sleep not yet
due, or an event wait) answered `pending` from then on (`ScriptOps.pend`); at `end` the outermost block parks on
every such child, timer and wait at once (`script_waits.park`), so the children all run at the same time, and the
execution after the park replays the thunks with what ended journaled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from mcp_harness.runs.script_journal import Answer, Execution, Frame, key_json

if TYPE_CHECKING:
    from mcp_harness.runs.resolve import RunHost

STATUSES = ("pending", "running", "done", "failed", "skipped")


class ScriptOps(Protocol):
    """The part of `script_ops.ScriptOps` the blocks use: declared here, so this module does not import the one
    that dispatches to it."""

    @property
    def services(self) -> RunHost: ...
    def error(self, ex: Execution, code: str, message: str, **extra: Any) -> Answer: ...
    def pend(self, ex: Execution) -> Answer: ...
    async def park_pending(self, ex: Execution) -> NoReturn: ...


async def parallel(ops: ScriptOps, ex: Execution, args: list[Any]) -> Answer:
    phase = args[0] if args else None
    if phase == "begin":
        inherited = ex.pending
        ex.frames.append(Frame(pending=inherited, any_pending=inherited))
        return {"ok": True, "value": None}
    if not ex.frames:
        return ops.error(ex, "unknown-op", "ctx.parallel was not begun.")
    frame = ex.frames[-1]
    if phase == "thunk":
        if frame.started:
            frame.marks.append(frame.pending)
        frame.started = True
        frame.pending = len(ex.frames) > 1 and ex.frames[-2].pending
        return {"ok": True, "value": None}
    if frame.started:
        frame.marks.append(frame.pending)
    ex.frames.pop()
    failed, settle_all = (args[1:] + [None, None])[:2]
    failed = list(failed) if isinstance(failed, list) else []  # pyright: ignore[reportUnknownArgumentType]
    marks = frame.marks + [False] * max(0, len(failed) - len(frame.marks))
    # Like Promise.all, ctx.parallel rejects with a thunk's own failure without waiting for the rest; what those
    # children still do is stopped when the script ends (`ScriptExecutor._cancel_working`).
    definitive = any(f and not m for f, m in zip(failed, marks, strict=False))  # pyright: ignore[reportUnknownArgumentType]
    if not frame.any_pending or (definitive and not settle_all):
        return {"ok": True, "value": marks[: len(failed)] if failed else marks}
    if ex.frames:
        return ops.pend(ex)  # a nested block waits: so does the thunk of the block around it
    await ops.park_pending(ex)  # on every child, timer and wait its thunks reached (or a replay: all done)


async def step(ops: ScriptOps, ex: Execution, args: list[Any]) -> Answer:
    """`ctx.step(label, fn)`: journal its start and end (`step|step-<n>|<phase>`), mark the run plan's step of that
    label running, then done or failed, and stamp model children spawned inside it with that step."""
    label, phase, ok = (args + [None, None, None])[:3]
    if not isinstance(label, str) or not label.strip():
        return ops.error(ex, "invalid-input", "ctx.step(label, fn) needs a label.")
    if phase == "start":
        if ex.pending:
            return ops.pend(ex)
        ex.step_count += 1
        step_id = f"step-{ex.step_count}"
        ex.steps.append((step_id, label))
        await _journal_step(ops, ex, step_id, label, "start", "running")
        return {"ok": True, "value": step_id}
    step_id = ex.steps.pop()[0] if ex.steps else "step-0"
    if ex.pending:
        return ops.pend(ex)
    await _journal_step(ops, ex, step_id, label, "end", "done" if ok else "failed", ok=bool(ok))
    return {"ok": True, "value": None}


async def _journal_step(
    ops: ScriptOps, ex: Execution, step_id: str, label: str, phase: str, status: str, **extra: Any
) -> None:
    key = f"step|{step_id}|{phase}"
    if ex.journal.take(key) is not None:
        return
    entry = {"callSeq": ex.journal.new_seq(), "kind": "step", "key": key, "stepId": step_id, "label": label}
    entry.update(phase=phase, **extra)
    ex.journal.admit([entry])
    h = ops.services

    def write() -> None:
        with h.db.transaction():
            h.runs.append_journal(ex.run.id, [entry])
            plan = h.runs.get(ex.run.id).plan
            steps = plan.get("steps") if isinstance(plan, dict) else None
            if not isinstance(steps, list):
                return
            for item in steps:  # pyright: ignore[reportUnknownVariableType]
                if isinstance(item, dict) and item.get("label") == label:  # pyright: ignore[reportUnknownMemberType]
                    item["status"] = status
                    break
            h.runs.set_plan(ex.run.id, plan)  # pyright: ignore[reportArgumentType]

    await h.engine.offload(write)


async def plan(ops: ScriptOps, ex: Execution, steps: Any, title: Any) -> Answer:
    if not isinstance(steps, list) or not steps:
        return ops.error(ex, "invalid-input", "ctx.plan(steps, title=None) needs a non-empty list of steps.")
    normalized: list[dict[str, Any]] = []
    for i, item in enumerate(steps):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        if isinstance(item, str):
            label, status = item, "pending"
        elif isinstance(item, dict) and isinstance(item.get("label"), str):  # pyright: ignore[reportUnknownMemberType]
            label, status = item["label"], item.get("status") or "pending"  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        else:
            return ops.error(ex, "invalid-input", "Each plan step is a label or {label, status?}.")
        if status not in STATUSES:
            return ops.error(ex, "invalid-input", f"Unknown step status {status!r}.")
        normalized.append({"id": f"step-{i + 1}", "label": label, "status": status})
    new_plan: dict[str, Any] = {"steps": normalized}
    if isinstance(title, str) and title.strip():
        new_plan["title"] = title.strip()
    key = f"plan|{key_json(new_plan)}"
    if ex.journal.take(key) is None:
        entry = {"callSeq": ex.journal.new_seq(), "kind": "plan", "key": key, "plan": new_plan}
        ex.journal.admit([entry])
        h = ops.services

        def write() -> None:
            with h.db.transaction():
                h.runs.append_journal(ex.run.id, [entry])
                h.runs.set_plan(ex.run.id, new_plan)

        await h.engine.offload(write)
    return {"ok": True, "value": new_plan}


__all__ = ["parallel", "plan", "step"]
