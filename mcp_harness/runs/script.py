"""Script children (HARNESS §9): a `workflow` run executes its pinned Python source in Monty, durably.

Every execution runs the script from the start in a fresh interpreter. Each `ctx` operation is answered from the
run's content-keyed journal when the journal has its result, and executed (and journaled) otherwise
(`script_ops.py`, `script_blocks.py`, `script_journal.py`), so a script that parked on model children, or was
requeued by the boot sweep after a crash, replays to exactly where it stopped without repeating an effect: a call
the crash cut short is answered `interrupted`, never run twice.

While model children work the script run parks (`{reason: children, childRunIds}`) and holds no task; the last of
their terminal commits requeues it (`resolve._wake_script_parent`). Long sleeps and event waits park too
(`script_waits.py`): the pump requeues the run when its timer or timeout is due, a delivery when an event arrives
(`signals.py`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Literal

from mcp_harness.errors import HarnessError
from mcp_harness.runs.outcomes import Canceled, Failed, Outcome, Parked, Succeeded
from mcp_harness.runs.resolve import deliver, settle_plan_step
from mcp_harness.runs.script_journal import TERMINAL, Execution, Journal, Replay, Stop, json_safe
from mcp_harness.runs.script_ops import ScriptOps
from mcp_harness.sandbox import monty
from mcp_harness.store import run_waits

if TYPE_CHECKING:
    from mcp_harness.services import Services
    from mcp_harness.store.runs import RunRecord

logger = logging.getLogger(__name__)

FUEL_MESSAGE = "turn time limit exceeded"
"""How Monty words an exhausted slice; only believed when the host also saw the slice run that long."""


class ScriptExecutor:
    """Executes `kind: workflow` runs (script children). Callable as the engine's executor."""

    fuel_s: float = monty.FUEL_S
    """Pure compute per slice; tests shrink it."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.ops = ScriptOps(services)

    # -- the engine's interface ------------------------------------------------------------------------------

    async def __call__(self, run: RunRecord) -> Outcome:
        h = self.services
        if not run.source_text:
            return Failed(code="config-error", message="This script run has no source.")
        if run.agent_id is None:
            return Failed(code="config-error", message="This script run has no agent to act as.")
        while True:
            try:
                ex = await h.engine.offload(self._prepare, run)
            except HarnessError as exc:
                return Failed(code="config-error", message=exc.message)
            if ex is None:
                return Canceled()
            try:
                outcome = await self._execute(ex, run.source_text)
            except Replay:
                continue
            except Stop as stop:
                outcome = stop.outcome
            if not isinstance(outcome, Parked):
                await self._cancel_working(ex)
            return outcome

    def settled(self, run: RunRecord) -> None:
        """Terminal effects, in the terminal commit's transaction: drop the run's registered waits, close its plan
        (HARNESS §7.5), settle the parent's plan step and deliver the result to the parent's delegate call — unless
        the run continued as a new one (`ctx.continue_as_new`), whose final successor answers instead."""
        with self.services.db.transaction() as conn:
            run_waits.clear(conn, run.id)
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
            self.services.runs.set_plan(run.id, {**plan, "steps": steps})  # pyright: ignore[reportUnknownArgumentType]
        if continued_as(run) is not None:
            return
        settle_plan_step(self.services, run)
        deliver(self.services, run)
        if run.continued_from_run_id is not None and run.id in self.services.awaited_children:
            # The end of a chain an MCP client's call awaits: `script_waits._continue` added this run for it.
            self.services.db.after_commit(lambda: self.services.awaited_children.discard(run.id))

    # -- set-up and tear-down --------------------------------------------------------------------------------

    def _prepare(self, run: RunRecord) -> Execution | None:
        h = self.services
        assert run.agent_id is not None
        if h.runs.get(run.id).status != "running":
            return None
        agent = h.agents.get(run.agent_id)
        return Execution(run=run, agent=agent, journal=Journal.load(run.id, h.runs.journal(run.id)))

    async def _cancel_working(self, ex: Execution) -> None:
        """A script that ends while children of a parallel block still work (a failure mid-block) stops them."""
        for child_id in ex.waiting_on:
            child = await self.services.engine.offload(self.services.runs.get, child_id)
            if child.status not in TERMINAL:
                await self.services.engine.cancel(child_id)

    # -- the interpreter loop --------------------------------------------------------------------------------

    async def _execute(self, ex: Execution, source: str) -> Outcome:
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
        started = time.monotonic()
        try:
            async with AsyncMonty(min_processes=1, max_processes=1, request_timeout=self.fuel_s * 4 + 5) as pool:
                session = pool.checkout(script_name=monty.SCRIPT_NAME, limits=monty.limits(self.fuel_s))  # pyright: ignore[reportArgumentType]
                async with session:
                    started = time.monotonic()
                    snap = await session.feed_start(
                        monty.program(source),
                        inputs={"_harness_input": ex.run.input.get("input"), "_harness_run_id": ex.run.id},
                        print_callback=_printed,
                    )
                    while not isinstance(snap, MontyComplete):
                        if isinstance(snap, AsyncFunctionSnapshot):
                            if snap.is_os_function:
                                started = time.monotonic()
                                snap = await snap.resume_not_handled()
                            elif snap.function_name != monty.EXTERNAL:
                                message = f"name '{snap.function_name}' is not defined"
                                started = time.monotonic()
                                snap = await snap.resume({"exc_type": "NameError", "message": message})
                            else:
                                answer = await self.ops.op(ex, snap.args)
                                started = time.monotonic()
                                snap = await snap.resume({"return_value": answer})
                        elif isinstance(snap, AsyncNameLookupSnapshot):
                            started = time.monotonic()
                            snap = await snap.resume()  # an undefined name: NameError inside the script
                        else:
                            return Failed(
                                code="workflow-error",
                                message="The script awaited something outside ctx; ctx calls are synchronous.",
                            )
                    return Succeeded(json_safe(snap.output))
        except (MontyRuntimeError, MontySyntaxError) as exc:
            return self._failure(ex, monty.script_error(exc, lines), time.monotonic() - started)
        except MontyCrashedError as exc:
            if exc.timed_out:
                return _fuel_exhausted(self.fuel_s, None)
            return Failed(code="workflow-error", message=f"The script interpreter stopped: {exc}")
        except MontyError as exc:
            return Failed(code="workflow-error", message=str(exc))

    def _failure(self, ex: Execution, error: monty.ScriptError, slice_s: float) -> Outcome:
        # Monty's slice limit cannot be caught inside the script, but a script can raise a look-alike: only a slice
        # the host saw last the whole allowance is fuel exhaustion.
        if error.kind == "TimeoutError" and error.message.startswith(FUEL_MESSAGE) and slice_s >= self.fuel_s:
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


def continued_as(run: RunRecord) -> str | None:
    """The successor of a run that ended with `ctx.continue_as_new`, else None."""
    output = run.output
    if run.status == "succeeded" and isinstance(output, dict) and output.get("continued") is True:  # pyright: ignore[reportUnknownMemberType]
        successor = output.get("continuedAsRunId")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return successor if isinstance(successor, str) else None
    return None


def _fuel_exhausted(fuel_s: float, error: monty.ScriptError | None) -> Failed:
    where = f" ({error.describe()})" if error is not None else ""
    return Failed(
        code="fuel-exhausted",
        message=f"The script computed for more than {fuel_s:g} s without calling ctx{where}.",
    )


def _printed(stream: Literal["stdout", "stderr"], text: str) -> None:
    logger.debug("script %s: %s", stream, text.rstrip())


__all__ = ["ScriptExecutor", "continued_as", "json_safe"]
