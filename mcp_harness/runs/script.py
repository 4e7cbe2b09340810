"""Script children (HARNESS §9): a `workflow` run executes its pinned Python source in Monty, durably.

Every execution runs the script from the start in a fresh interpreter. Each `ctx` operation is answered from the
run's content-keyed journal when the journal has its result, and executed (and journaled) otherwise, so a script
that parked on a model child, or was requeued by the boot sweep after a crash, replays to exactly where it stopped
without repeating a finished effect. A call journaled without its result (the process died mid-call) runs again:
at-least-once. A model child journaled with its run id is re-attached to, never spawned twice.

While a model child works the script run parks (`{reason: children, childRunIds}`) and holds no task; the child's
terminal commit requeues it (`resolve._wake_script_parent`).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
import cbor2

from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome, Parked, Succeeded
from mcp_harness.runs.resolve import deliver, settle_plan_step
from mcp_harness.sandbox import monty
from mcp_harness.store._util import now_ms
from mcp_harness.tools import call as call_verb
from mcp_harness.tools import catalog
from mcp_harness.tools import delegate as delegate_verb
from mcp_harness.tools.base import VerbContext
from mcp_harness.tools.contracts import CALLABLES, callable_alias, input_errors
from mcp_harness.tools.schema_subset import value_errors

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.runs import RunRecord

logger = logging.getLogger(__name__)

MAX_JOURNAL_ENTRIES = 5_000
MAX_JOURNAL_BYTES = 8 * 1024 * 1024
TERMINAL = ("succeeded", "failed", "canceled")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def json_safe(value: Any) -> Any:
    """A script's value as JSON data: tuples become lists, other unknown objects their repr."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return repr(value)


class _Stop(Exception):
    """Ends the execution with an outcome: a park on a child, or a failure that is not the script's to catch."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(repr(outcome))
        self.outcome = outcome


@dataclass
class _Group:
    """The journal entries of one effect (one `callSeq`)."""

    call_seq: int
    key: str
    entries: list[dict[str, Any]] = field(default_factory=list)

    def first(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in self.entries if e["kind"] == kind), None)


@dataclass
class _Journal:
    """The run's journal as loaded at the start of an execution: groups queued FIFO per key (HARNESS §9.4)."""

    run_id: str
    queues: dict[str, deque[_Group]]
    next_seq: int
    count: int
    size: int

    @classmethod
    def load(cls, run_id: str, entries: list[dict[str, Any]]) -> _Journal:
        groups: dict[int, _Group] = {}
        size = 0
        for entry in entries:
            size += len(cbor2.dumps(entry, canonical=True))
            seq = int(entry["callSeq"])
            group = groups.setdefault(seq, _Group(call_seq=seq, key=str(entry.get("key") or "")))
            group.entries.append(entry)
        queues: dict[str, deque[_Group]] = {}
        for seq in sorted(groups):
            queues.setdefault(groups[seq].key, deque()).append(groups[seq])
        return cls(run_id, queues, max(groups, default=0) + 1, len(entries), size)

    def take(self, key: str) -> _Group | None:
        queue = self.queues.get(key)
        return queue.popleft() if queue else None

    def new_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def admit(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Count entries about to be appended against the caps; `journal-cap` failure when they would pass them."""
        listed = list(entries)
        size = sum(len(cbor2.dumps(dict(e), canonical=True)) for e in listed)
        if self.count + len(listed) > MAX_JOURNAL_ENTRIES or self.size + size > MAX_JOURNAL_BYTES:
            raise _Stop(
                Failed(
                    code="journal-cap",
                    message=f"The script's journal is full ({MAX_JOURNAL_ENTRIES} entries or "
                    f"{MAX_JOURNAL_BYTES // (1024 * 1024)} MiB); do less per run.",
                )
            )
        self.count += len(listed)
        self.size += size


@dataclass
class _Execution:
    run: RunRecord
    agent: AgentRecord
    journal: _Journal
    raised: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Errors handed to the script as RuntimeError, by message, so an uncaught one fails the run with its code."""


Answer = dict[str, Any]


class ScriptExecutor:
    """Executes `kind: workflow` runs (script children). Callable as the engine's executor."""

    fuel_s: float = monty.FUEL_S
    """Pure compute per slice; tests shrink it."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    # -- the engine's interface ------------------------------------------------------------------------------

    async def __call__(self, run: RunRecord) -> Outcome:
        h = self.harness
        if not run.source_text:
            return Failed(code="config-error", message="This script run has no source.")
        if run.agent_id is None:
            return Failed(code="config-error", message="This script run has no agent to act as.")
        try:
            prepared = await h.engine.offload(self._prepare, run)
        except HarnessError as exc:
            return Failed(code="config-error", message=exc.message)
        if prepared is None:
            return Canceled()
        try:
            return await self._execute(prepared, run.source_text)
        except _Stop as stop:
            return stop.outcome

    def settled(self, run: RunRecord) -> None:
        """Terminal effects, in the terminal commit's transaction: close the run's plan (HARNESS §7.5), settle the
        parent's plan step and deliver the result to the parent's delegate call."""
        plan = run.plan
        if isinstance(plan, dict) and isinstance(plan.get("steps"), list):
            ok = run.status == "succeeded"
            steps: list[dict[str, Any]] = []
            for step in plan["steps"]:  # pyright: ignore[reportUnknownVariableType]
                status = step.get("status")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
                if status == "running":
                    status = "done" if ok else "failed"
                elif status == "pending":
                    status = "skipped"
                steps.append({**step, "status": status})  # pyright: ignore[reportUnknownArgumentType]
            self.harness.runs.set_plan(run.id, {**plan, "steps": steps})  # pyright: ignore[reportUnknownArgumentType]
        settle_plan_step(self.harness, run)
        deliver(self.harness, run)

    # -- set-up ----------------------------------------------------------------------------------------------

    def _prepare(self, run: RunRecord) -> _Execution | None:
        h = self.harness
        assert run.agent_id is not None
        if h.runs.get(run.id).status != "running":
            return None
        agent = h.agents.get(run.agent_id)
        return _Execution(run=run, agent=agent, journal=_Journal.load(run.id, h.runs.journal(run.id)))

    # -- the interpreter loop --------------------------------------------------------------------------------

    async def _execute(self, ex: _Execution, source: str) -> Outcome:
        from pydantic_monty import (
            AsyncFunctionSnapshot,
            AsyncMonty,
            AsyncNameLookupSnapshot,
            MontyComplete,
            MontyCrashedError,
            MontyError,
            MontyRuntimeError,
            MontySyntaxError,
        )

        lines = source.count("\n") + 1
        try:
            async with AsyncMonty(min_processes=1, max_processes=1, request_timeout=self.fuel_s * 4 + 5) as pool:
                session = pool.checkout(script_name=monty.SCRIPT_NAME, limits=monty.limits(self.fuel_s))  # pyright: ignore[reportArgumentType]
                async with session:
                    snap = await session.feed_start(
                        monty.program(source),
                        inputs={"_harness_input": ex.run.input.get("input"), "_harness_run_id": ex.run.id},
                        print_callback=_printed,
                    )
                    while not isinstance(snap, MontyComplete):
                        if isinstance(snap, AsyncFunctionSnapshot):
                            if snap.is_os_function:
                                snap = await snap.resume_not_handled()
                            elif snap.function_name != monty.EXTERNAL:
                                message = f"name '{snap.function_name}' is not defined"
                                snap = await snap.resume({"exc_type": "NameError", "message": message})
                            else:
                                answer = await self._op(ex, snap.args)
                                snap = await snap.resume({"return_value": answer})
                        elif isinstance(snap, AsyncNameLookupSnapshot):
                            snap = await snap.resume()  # an undefined name: NameError inside the script
                        else:
                            return Failed(
                                code="workflow-error",
                                message="The script awaited something outside ctx; ctx calls are synchronous.",
                            )
                    return Succeeded(json_safe(snap.output))
        except (MontyRuntimeError, MontySyntaxError) as exc:
            return self._failure(ex, monty.script_error(exc, lines))
        except MontyCrashedError as exc:
            if exc.timed_out:
                return _fuel_exhausted(self.fuel_s, None)
            return Failed(code="workflow-error", message=f"The script interpreter stopped: {exc}")
        except MontyError as exc:
            return Failed(code="workflow-error", message=str(exc))

    def _failure(self, ex: _Execution, error: monty.ScriptError) -> Outcome:
        if error.kind == "TimeoutError" and "time limit" in error.message:
            return _fuel_exhausted(self.fuel_s, error)
        if error.kind == "RuntimeError" and error.message in ex.raised:
            raised = ex.raised[error.message]
            detail = {k: raised[k] for k in ("tool", "callSeq") if k in raised}
            if error.line:
                detail["line"] = error.line
            where = f" (script.py line {error.line}: {(error.source_line or '').strip()})" if error.line else ""
            return Failed(code=raised["code"], message=f"{raised['message']}{where}", detail=detail or None)
        if error.kind == "MemoryError":
            return Failed(code="workflow-error", message=f"{error.describe()} — the script's memory limit is 64 MiB.")
        return Failed(code="workflow-error", message=error.describe())

    # -- ctx operations --------------------------------------------------------------------------------------

    async def _op(self, ex: _Execution, args: tuple[Any, ...]) -> Answer:
        op, rest = (args[0], args[1:]) if args else ("", ())
        if op == "call":
            tool, tool_input = (list(rest) + [None, None])[:2]
            return await self._call(ex, tool, tool_input)
        if op == "delegate":
            return await self._delegate(ex, rest[0] if rest else None)
        if op == "now":
            return await self._recorded(ex, "now", "now", lambda: now_ms())
        if op == "log":
            level, message, data = (list(rest) + [None, None, None])[:3]
            return await self._log(ex, str(level), str(message), json_safe(data))
        if op == "plan":
            steps, title = (list(rest) + [None, None])[:2]
            return await self._plan(ex, steps, title)
        return self._error(ex, "unknown-op", f"Unknown ctx operation {op!r}.")

    def _error(self, ex: _Execution, code: str, message: str, **extra: Any) -> Answer:
        text = f"{code}: {message}"
        ex.raised[text] = {"code": code, "message": message, **extra}
        return {"ok": False, "error": text}

    def _answer(self, ex: _Execution, result: Mapping[str, Any], **extra: Any) -> Answer:
        """A journaled result as the script sees it."""
        if result.get("status") == "ok":
            return {"ok": True, "value": result.get("output")}
        error = result.get("error") or {}
        return self._error(ex, str(error.get("code") or "tool-error"), str(error.get("message") or ""), **extra)

    async def _append(self, ex: _Execution, entries: list[dict[str, Any]]) -> None:
        ex.journal.admit(entries)
        await self.harness.engine.offload(self.harness.runs.append_journal, ex.run.id, entries)

    async def _recorded(self, ex: _Execution, key: str, kind: str, make: Any) -> Answer:
        """`now`: journal once; replay answers with the journaled value."""
        group = ex.journal.take(key)
        if group is not None and (entry := group.first(kind)) is not None:
            return {"ok": True, "value": entry.get("value")}
        value = make()
        await self._append(ex, [{"callSeq": ex.journal.new_seq(), "kind": kind, "key": key, "value": value}])
        return {"ok": True, "value": value}

    async def _log(self, ex: _Execution, level: str, message: str, data: Any) -> Answer:
        key = f"log|{level}|{message}"
        if ex.journal.take(key) is None:
            entry: dict[str, Any] = {"callSeq": ex.journal.new_seq(), "kind": "log", "key": key, "level": level}
            entry["message"] = message
            if data is not None:
                entry["data"] = data
            await self._append(ex, [entry])
            logger.info("script %s [%s] %s", ex.run.id, level, message)
        return {"ok": True, "value": None}

    async def _plan(self, ex: _Execution, steps: Any, title: Any) -> Answer:
        if not isinstance(steps, list) or not steps:
            return self._error(ex, "invalid-input", "ctx.plan(steps, title=None) needs a non-empty list of steps.")
        normalized: list[dict[str, Any]] = []
        for i, step in enumerate(steps):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            if isinstance(step, str):
                label, status = step, "pending"
            elif isinstance(step, dict) and isinstance(step.get("label"), str):  # pyright: ignore[reportUnknownMemberType]
                label, status = step["label"], step.get("status") or "pending"  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            else:
                return self._error(ex, "invalid-input", "Each plan step is a label or {label, status?}.")
            if status not in ("pending", "running", "done", "failed", "skipped"):
                return self._error(ex, "invalid-input", f"Unknown step status {status!r}.")
            normalized.append({"id": f"step-{i + 1}", "label": label, "status": status})
        plan: dict[str, Any] = {"steps": normalized}
        if isinstance(title, str) and title.strip():
            plan["title"] = title.strip()
        key = f"plan|{_json(plan)}"
        if ex.journal.take(key) is None:
            entry = {"callSeq": ex.journal.new_seq(), "kind": "plan", "key": key, "plan": plan}
            ex.journal.admit([entry])

            def write() -> None:
                with self.harness.db.transaction():
                    self.harness.runs.append_journal(ex.run.id, [entry])
                    self.harness.runs.set_plan(ex.run.id, plan)

            await self.harness.engine.offload(write)
        return {"ok": True, "value": plan}

    async def _call(self, ex: _Execution, tool: Any, tool_input: Any) -> Answer:
        if not isinstance(tool, str) or not tool.strip():
            return self._error(ex, "invalid-input", "ctx.call(tool, input) needs a tool name.")
        if tool_input is not None and not isinstance(tool_input, dict):
            return self._error(ex, "invalid-input", f"The input of {tool} must be a dict (or None).")
        name = tool.strip().removeprefix("functions.")
        key = f"tool|{name}|{_json(tool_input)}"
        group = ex.journal.take(key)
        if group is not None and (result := group.first("result")) is not None:
            return self._answer(ex, result, tool=name, callSeq=group.call_seq)
        if group is not None:
            seq = group.call_seq  # journaled without a result: the effect may or may not have happened; run again
        else:
            seq = ex.journal.new_seq()
            call = {"callSeq": seq, "kind": "call", "key": key, "op": "tool", "tool": name, "input": tool_input}
            await self._append(ex, [call])
        result = await self._run_tool(ex, name, tool_input or {})
        await self._append(ex, [{"callSeq": seq, "kind": "result", "key": key, **result}])
        return self._answer(ex, result, tool=name, callSeq=seq)

    async def _run_tool(self, ex: _Execution, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
        """Run one tool for the script: `{status: ok, output}` or `{status: error, error: {code, message}}`."""
        h = self.harness
        ctx = VerbContext(harness=h, agent=ex.agent, session_id=None, actor="agent", run_id=ex.run.id)

        def failed(code: str, message: str) -> dict[str, Any]:
            return {"status": "error", "error": {"code": code, "message": message}}

        try:
            if name in ("read", "write"):
                problems = input_errors(name, tool_input)
                if problems:
                    return failed("invalid-input", f"Invalid input for {name}: {'; '.join(problems)}.")
                result, error = await anyio.to_thread.run_sync(h.invoke_sync, ctx, name, tool_input)
                if error is not None:
                    return failed("tool-error", error.message)
                assert result is not None
                return {"status": "ok", "output": result.data}
            callables = await anyio.to_thread.run_sync(catalog.callable_set, h, ex.agent.definition)
            alias = callable_alias(name)
            if alias in CALLABLES and alias in callables:
                spec = catalog.callable_spec(h, alias)
                problems = value_errors(spec.input_schema, tool_input)
                if problems:
                    return failed("invalid-input", f"Invalid input for {alias}: {'; '.join(problems)}.")
                return {"status": "ok", "output": (await call_verb.dispatch(ctx, alias, tool_input)).data}
            record = await anyio.to_thread.run_sync(h.tools.get, ex.agent.id, name)
            if record is not None and record.kind == "lambda" and record.enabled:
                out = await call_verb.run_lambda(ctx, record.document, record.cid, tool_input, callables)
                return {"status": "ok", "output": out.data}
            lambdas = await anyio.to_thread.run_sync(h.tools.list, ex.agent.id)
            allowed = ["read", "write", *callables, *(r.name for r in lambdas if r.kind == "lambda" and r.enabled)]
            return failed("unknown-tool", f"No tool {name} for scripts. A script can call: {', '.join(allowed)}.")
        except HarnessError as exc:
            return failed("tool-error", exc.message)

    async def _delegate(self, ex: _Execution, raw: Any) -> Answer:
        """`ctx.delegate(spec)`: a model child; resolves to its output, or raises with its error code."""
        try:
            spec = delegate_verb.normalize_spec(raw if isinstance(raw, dict) else {})  # pyright: ignore[reportUnknownArgumentType]
        except BadRequest as exc:
            return self._error(ex, "invalid-input", exc.message)
        key = f"agent|{_json(spec)}"
        group = ex.journal.take(key)
        if group is not None and (result := group.first("result")) is not None:
            return self._answer(ex, result, callSeq=group.call_seq)
        call = group.first("call") if group is not None else None
        child_id = call.get("childRunId") if call is not None else None
        if group is not None and isinstance(child_id, str):
            seq = group.call_seq
        else:
            seq = group.call_seq if group is not None else ex.journal.new_seq()
            entry = {"callSeq": seq, "kind": "call", "key": key, "op": "agent", "input": spec}
            ex.journal.admit([entry])
            try:
                child_id = await self.harness.engine.offload(self._spawn, ex, spec, entry)
            except HarnessError as exc:
                return self._error(ex, "tool-error", exc.message, callSeq=seq)
            self.harness.engine.wake()
        child = await self.harness.engine.offload(self._park_unless_done, ex, child_id)
        if child is None:
            raise _Stop(Parked({"reason": "children", "childRunIds": [child_id]}))
        result = _child_result(child)
        await self._append(ex, [{"callSeq": seq, "kind": "result", "key": key, "childRunId": child_id, **result}])
        return self._answer(ex, result, callSeq=seq)

    def _spawn(self, ex: _Execution, spec: dict[str, Any], entry: dict[str, Any]) -> str:
        """Spawn the model child and journal the call with its run id, in one transaction. Blocking."""
        h = self.harness
        run = ex.run
        parent_session = run.input.get("parentSessionId")
        if not isinstance(parent_session, str):
            raise BadRequest("This script has no conversation to nest its children under.")
        if isinstance(spec.get("tools"), list):
            parent_tools = ex.agent.definition.tools
            allowed = None if parent_tools is None else {callable_alias(t) for t in parent_tools}
            spec["tools"] = [t for t in spec["tools"] if allowed is None or callable_alias(t) in allowed]
        with h.db.transaction():
            spawned = delegate_verb.spawn_child(
                h,
                agent_id=ex.agent.id,
                parent_session_id=parent_session,
                parent_run=h.runs.get(run.id),
                tool_call_id=None,
                spec=spec,
            )
            h.runs.append_journal(run.id, [{**entry, "childRunId": spawned.run_id}])
        return spawned.run_id

    def _park_unless_done(self, ex: _Execution, child_id: str) -> RunRecord | None:
        """The child once it has ended; otherwise park on it in the same transaction (so its end cannot slip by
        between the check and the park) and return None. Blocking."""
        h = self.harness
        with h.db.transaction():
            child = h.runs.get(child_id)
            if child.status in TERMINAL:
                return child
            h.runs.park(ex.run.id, {"reason": "children", "childRunIds": [child_id]})
            return None


def _child_result(child: RunRecord) -> dict[str, Any]:
    """A model child's end as a journaled result (HARNESS §9.2: output, or canceled / its code / agent-failed)."""
    if child.status == "succeeded":
        return {"status": "ok", "output": child.output}
    if child.status == "canceled":
        return {"status": "error", "error": {"code": "canceled", "message": "The model child was canceled."}}
    error = child.error or {}
    code = str(error.get("code") or "agent-failed")
    return {"status": "error", "error": {"code": code, "message": str(error.get("message") or "The child failed.")}}


def _fuel_exhausted(fuel_s: float, error: monty.ScriptError | None) -> Failed:
    where = f" ({error.describe()})" if error is not None else ""
    return Failed(
        code="fuel-exhausted",
        message=f"The script computed for more than {fuel_s:g} s without calling ctx{where}.",
    )


def _printed(stream: Literal["stdout", "stderr"], text: str) -> None:
    logger.debug("script %s: %s", stream, text.rstrip())


__all__ = ["ScriptExecutor", "json_safe"]
