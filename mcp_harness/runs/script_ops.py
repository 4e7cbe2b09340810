"""The ctx operations of a script (HARNESS §9.2–§9.4): each is answered from the journal when it holds the
effect's result, and executed and journaled otherwise.

Every effect is at most once. A tool call's intent is journaled before it starts; one journaled without its result
(the process stopped mid-call) is never run again: the replay answers it with an `interrupted` error (a
`RuntimeError` the script may catch; uncaught, the run fails with that code), journaled so that every later replay
answers the same. A model child is spawned and journaled with its run id in one transaction, so it is re-attached
to, never spawned twice; a refused spawn is journaled with its refusal, so a replay refuses identically. (The same
holds inside `ctx.parallel`, whose calls are these.)

`ctx.parallel` runs its thunks in turn; a thunk that reaches a model child still working (or a sleep or an event
wait, `script_waits.py`) stops there (`pending`), and once every thunk had its turn the script parks on all of them
at once (`script_blocks.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from mcp_harness.callables.registry import callable_alias
from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.grants import narrowed
from mcp_harness.runs.outcomes import INTERRUPTED, Parked
from mcp_harness.runs.script_journal import TERMINAL, Answer, Execution, Stop, child_result, json_safe, key_json
from mcp_harness.runs.script_tools import run_tool
from mcp_harness.store._util import now_ms
from mcp_harness.verbs import delegate as delegate_verb

if TYPE_CHECKING:
    from mcp_harness.services import Services
    from mcp_harness.store.runs import RunRecord

logger = logging.getLogger(__name__)

PENDING = "pending: this thunk waits (a model child, a sleep or an event); ctx.parallel runs it again after that"
INTERRUPTED_RESULT: dict[str, Any] = {"status": "error", "error": {"code": "interrupted", "message": INTERRUPTED}}


class ScriptOps:
    """Answers one execution's ctx operations. It takes every service, not a part: `ctx.call` runs verbs, and a
    verb's context carries them all."""

    def __init__(self, services: Services) -> None:
        self.services = services

    # -- plumbing --------------------------------------------------------------------------------------------

    def error(self, ex: Execution, code: str, message: str, **extra: Any) -> Answer:
        text = f"{code}: {message}"
        ex.raised[text] = {"code": code, "message": message, **extra}
        return {"ok": False, "error": text}

    def pend(self, ex: Execution) -> Answer:
        """The answer inside a thunk that reached unfinished work: no effect, and the thunk's result is discarded."""
        frame = ex.frames[-1]
        frame.pending = frame.any_pending = True
        return {"ok": False, "error": PENDING}

    def answer(self, ex: Execution, result: Mapping[str, Any], **extra: Any) -> Answer:
        """A journaled result as the script sees it."""
        if result.get("status") == "ok":
            return {"ok": True, "value": result.get("output")}
        error = result.get("error") or {}
        return self.error(ex, str(error.get("code") or "tool-error"), str(error.get("message") or ""), **extra)

    async def append(self, ex: Execution, entries: list[dict[str, Any]]) -> None:
        ex.journal.admit(entries)
        await self.services.engine.offload(self.services.runs.append_journal, ex.run.id, entries)

    # -- dispatch --------------------------------------------------------------------------------------------

    async def op(self, ex: Execution, args: tuple[Any, ...]) -> Answer:
        from mcp_harness.runs import script_blocks, script_waits

        op, rest = (args[0], list(args[1:])) if args else ("", [])
        if op == "parallel":
            return await script_blocks.parallel(self, ex, rest)
        if op == "step":
            return await script_blocks.step(self, ex, rest)
        if ex.pending:
            return self.pend(ex)
        if op == "call":
            tool, tool_input = (rest + [None, None])[:2]
            return await self.call(ex, tool, tool_input)
        if op == "delegate":
            return await self.delegate(ex, rest[0] if rest else None)
        if op == "now":
            return await self.now(ex)
        if op == "log":
            level, message, data = (rest + [None, None, None])[:3]
            return await self.log(ex, str(level), str(message), json_safe(data))
        if op == "plan":
            steps, title = (rest + [None, None])[:2]
            return await script_blocks.plan(self, ex, steps, title)
        if op == "sleep":
            return await script_waits.sleep(self, ex, rest[0] if rest else None)
        if op == "wait":
            return await script_waits.wait_for_event(self, ex, rest)
        if op == "continue":
            return await script_waits.continue_as_new(self, ex, rest[0] if rest else None)
        return self.error(ex, "unknown-op", f"Unknown ctx operation {op!r}.")

    # -- now, log --------------------------------------------------------------------------------------------

    async def now(self, ex: Execution) -> Answer:
        """Journal once; replay answers with the journaled value."""
        group = ex.journal.take("now")
        if group is not None and (entry := group.first("now")) is not None:
            return {"ok": True, "value": entry.get("value")}
        value = now_ms()
        await self.append(ex, [{"callSeq": ex.journal.new_seq(), "kind": "now", "key": "now", "value": value}])
        return {"ok": True, "value": value}

    async def log(self, ex: Execution, level: str, message: str, data: Any) -> Answer:
        key = f"log|{level}|{message}"
        if ex.journal.take(key) is None:
            entry: dict[str, Any] = {"callSeq": ex.journal.new_seq(), "kind": "log", "key": key, "level": level}
            entry["message"] = message
            if data is not None:
                entry["data"] = data
            await self.append(ex, [entry])
            logger.info("script %s [%s] %s", ex.run.id, level, message)
        return {"ok": True, "value": None}

    # -- call ------------------------------------------------------------------------------------------------

    async def call(self, ex: Execution, tool: Any, tool_input: Any) -> Answer:
        if not isinstance(tool, str) or not tool.strip():
            return self.error(ex, "invalid-input", "ctx.call(tool, input) needs a tool name.")
        if tool_input is not None and not isinstance(tool_input, dict):
            return self.error(ex, "invalid-input", f"The input of {tool} must be a dict (or None).")
        name = tool.strip().removeprefix("functions.")
        key = f"tool|{name}|{key_json(tool_input)}"
        group = ex.journal.take(key)
        if group is not None and (result := group.first("result")) is not None:
            return self.answer(ex, result, tool=name, callSeq=group.call_seq)
        if group is not None:
            # Journaled without a result: the process stopped mid-call, and the effect may or may not have happened.
            # Never run it again; the answer is journaled so that every later replay gives the same one.
            seq, result = group.call_seq, INTERRUPTED_RESULT
        else:
            seq = ex.journal.new_seq()
            call = {"callSeq": seq, "kind": "call", "key": key, "op": "tool", "tool": name, "input": tool_input}
            await self.append(ex, [call])
            result = await run_tool(self.services, ex, name, tool_input or {})  # pyright: ignore[reportUnknownArgumentType]
        await self.append(ex, [{"callSeq": seq, "kind": "result", "key": key, **result}])
        return self.answer(ex, result, tool=name, callSeq=seq)

    # -- delegate --------------------------------------------------------------------------------------------

    async def delegate(self, ex: Execution, raw: Any) -> Answer:
        """`ctx.delegate(spec)`: a model child; resolves to its output, or raises with its error code."""
        h = self.services
        try:
            spec = delegate_verb.normalize_spec(raw if isinstance(raw, dict) else {})  # pyright: ignore[reportUnknownArgumentType]
        except BadRequest as exc:
            return self.error(ex, "invalid-input", exc.message)
        key = f"agent|{key_json(spec)}"
        group = ex.journal.take(key)
        if group is not None and (result := group.first("result")) is not None:
            return self.answer(ex, result, callSeq=group.call_seq)
        call = group.first("call") if group is not None else None
        child_id = call.get("childRunId") if call is not None else None
        seq = group.call_seq if group is not None else ex.journal.new_seq()
        if not isinstance(child_id, str):
            entry = {"callSeq": seq, "kind": "call", "key": key, "op": "agent", "input": spec}
            ex.journal.admit([entry])
            try:
                child_id = await h.engine.offload(self._spawn, ex, spec, entry)
            except HarnessError as exc:
                # Journaled with its refusal, so a replay refuses the same way rather than trying again.
                refusal = {"status": "error", "error": {"code": "tool-error", "message": exc.message}}
                entries = [] if call is not None else [entry]
                await self.append(ex, [*entries, {"callSeq": seq, "kind": "result", "key": key, **refusal}])
                return self.answer(ex, refusal, callSeq=seq)
            h.engine.wake()
        if ex.frames:  # inside ctx.parallel: never park here; the block parks on all its children at its end
            child = await h.engine.offload(h.runs.get, child_id)
            if child.status not in TERMINAL:
                if child_id not in ex.waiting_on:
                    ex.waiting_on.append(child_id)
                return self.pend(ex)
        else:
            if await h.engine.offload(self.park_unless_done, ex, [child_id]):
                raise Stop(Parked({"reason": "children", "childRunIds": [child_id]}))
            child = await h.engine.offload(h.runs.get, child_id)
        result = child_result(child)
        await self.append(ex, [{"callSeq": seq, "kind": "result", "key": key, "childRunId": child_id, **result}])
        return self.answer(ex, result, callSeq=seq)

    def _spawn(self, ex: Execution, spec: dict[str, Any], entry: dict[str, Any]) -> str:
        """Spawn the model child and journal the call with its run id, in one transaction. Blocking."""
        h = self.services
        run = ex.run
        parent_session = run.input.get("parentSessionId")
        if not isinstance(parent_session, str):
            raise BadRequest("This script has no conversation to nest its children under.")
        spec = dict(spec)
        if isinstance(spec.get("tools"), list):
            parent_tools = ex.agent.definition.tools
            allowed = None if parent_tools is None else {callable_alias(t) for t in parent_tools}
            spec["tools"] = [
                t
                for t in spec["tools"]
                if allowed is None or callable_alias(t) in allowed or narrowed(parent_tools, [t])
            ]
        with h.db.transaction():
            current = h.runs.get(run.id)
            spawned = delegate_verb.spawn_child(
                h,
                agent_id=ex.agent.id,
                parent_session_id=parent_session,
                parent_run=current,
                tool_call_id=None,
                spec=spec,
                script_step=_open_step(current, ex),
            )
            h.runs.append_journal(run.id, [{**entry, "childRunId": spawned.run_id}])
        return spawned.run_id

    async def park_pending(self, ex: Execution) -> NoReturn:
        """Park on every child, timer and wait pending thunks reached; never returns (see `script_waits.park`)."""
        from mcp_harness.runs import script_waits

        await script_waits.park(self, ex)

    def park_unless_done(self, ex: Execution, child_ids: list[str]) -> list[str]:
        """The children still working; when there are any, park on them in the same transaction (so an end cannot
        slip by between the check and the park). Blocking."""
        h = self.services
        with h.db.transaction():
            working = [rid for rid in child_ids if h.runs.get(rid).status not in TERMINAL]
            if working:
                h.runs.park(ex.run.id, {"reason": "children", "childRunIds": working})
            return working


def _open_step(run: RunRecord, ex: Execution) -> dict[str, Any]:
    """The innermost open `ctx.step` as the child's plan step: the run plan's step of that label, if any."""
    if not ex.steps:
        return {}
    label = ex.steps[-1][1]
    steps = (run.plan or {}).get("steps") or []
    found = next((s for s in steps if isinstance(s, dict) and s.get("label") == label), None)  # pyright: ignore[reportUnknownVariableType]
    return {"id": found["id"] if found else None, "label": label}  # pyright: ignore[reportUnknownVariableType]


__all__ = ["INTERRUPTED_RESULT", "PENDING", "ScriptOps"]
