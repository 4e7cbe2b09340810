"""The ctx operations that wait (HARNESS §9.4–§9.5): `ctx.sleep`, `ctx.wait_for_event`, `ctx.continue_as_new`.

A sleep journals its `timer {wakeAt}` once and `fired` when it is over; a short remaining wait holds the execution
(a real timer), a long one parks the run durably with `not_before = wakeAt`, so no task is held and a restart
changes nothing: the pump requeues the run when it is due and the replay finds the journaled `wakeAt`. A wait
journals `wait {waitId, match, timeoutAt?}` once, registers its row (`store/run_waits.py`) with the park, and
resolves with the `event` a delivery journals (`runs/signals.py`), or with None once its deadline has passed.

Inside `ctx.parallel`, a sleep not yet due or an open wait makes its thunk pending, like a model child still
working; at the block's end `park` parks on all of them at once: on the open waits (the first names the park),
the earliest deadline among timers and wait timeouts, and the children still working.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import anyio

from mcp_harness.errors import BadRequest
from mcp_harness.runs.outcomes import Parked, Succeeded
from mcp_harness.runs.script_journal import TERMINAL, Answer, Execution, Replay, Stop, json_safe, key_json
from mcp_harness.runs.signals import check_match
from mcp_harness.store import run_waits
from mcp_harness.store._util import new_id, now_ms
from mcp_harness.store.run_waits import WaitRow

if TYPE_CHECKING:
    from mcp_harness.services import Services

PARK_THRESHOLD_MS = 60_000
"""A sleep with at least this long still to go parks the run durably; a shorter one holds the execution."""


class ScriptOps(Protocol):
    """The part of `script_ops.ScriptOps` these operations use."""

    @property
    def services(self) -> Services: ...
    def error(self, ex: Execution, code: str, message: str, **extra: Any) -> Answer: ...
    def pend(self, ex: Execution) -> Answer: ...
    async def append(self, ex: Execution, entries: list[dict[str, Any]]) -> None: ...


OK: Answer = {"ok": True, "value": None}


def _duration(value: Any) -> int | None:
    """Milliseconds as a whole non-negative number; None when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return max(0, int(value))


# -- sleep ---------------------------------------------------------------------------------------------------------


async def sleep(ops: ScriptOps, ex: Execution, ms: Any) -> Answer:
    duration = _duration(ms)
    if duration is None:
        return ops.error(ex, "invalid-input", "ctx.sleep(ms) needs a number of milliseconds.")
    key = f"sleep|{duration}"
    group = ex.journal.take(key)
    timer = group.first("timer") if group is not None else None
    if group is not None and group.first("fired") is not None:
        return OK
    if group is not None and timer is not None:
        seq, wake_at = group.call_seq, int(timer["wakeAt"])
    else:
        seq = group.call_seq if group is not None else ex.journal.new_seq()
        wake_at = now_ms() + duration
        await ops.append(ex, [{"callSeq": seq, "kind": "timer", "key": key, "wakeAt": wake_at}])
    remaining = wake_at - now_ms()
    if remaining > 0 and ex.frames:
        ex.timers.append(wake_at)
        return ops.pend(ex)
    if remaining >= PARK_THRESHOLD_MS:
        ex.timers.append(wake_at)
        await park(ops, ex)
    if remaining > 0:
        await anyio.sleep(remaining / 1000)
    await ops.append(ex, [{"callSeq": seq, "kind": "fired", "key": key}])
    return OK


# -- wait_for_event ----------------------------------------------------------------------------------------------


async def wait_for_event(ops: ScriptOps, ex: Execution, args: list[Any]) -> Answer:
    signal, timeout_ms, match, label = (args + [None] * 4)[:4]
    if match is not None and not isinstance(match, dict):
        return ops.error(ex, "invalid-input", "ctx.wait_for_event(match=…) takes a dict or None.")
    raw: dict[str, Any] = dict(match or {})  # pyright: ignore[reportUnknownArgumentType]
    if signal is not None:
        if "signal" in raw and raw["signal"] != signal:
            return ops.error(ex, "invalid-input", "Name the signal once: as `signal` or as match['signal'].")
        raw["signal"] = signal
    try:
        criteria = check_match(raw)
    except BadRequest as exc:
        return ops.error(ex, "invalid-input", exc.message)
    timeout = _duration(timeout_ms) if timeout_ms is not None else None
    if timeout_ms is not None and not timeout:
        return ops.error(
            ex, "invalid-input", "timeout_ms is a positive number of milliseconds (None waits without a deadline)."
        )
    if label is not None and not isinstance(label, str):
        return ops.error(ex, "invalid-input", "A wait's label is a string.")
    key = f"wait|{key_json(criteria)}"
    group = ex.journal.take(key)
    if group is not None and (event := group.first("event")) is not None:
        return {"ok": True, "value": event.get("delivery")}
    registered = group.first("wait") if group is not None else None
    if group is not None and registered is not None:
        seq, wait_id, timeout_at = group.call_seq, str(registered["waitId"]), registered.get("timeoutAt")
        label = registered.get("label")
    else:
        seq = group.call_seq if group is not None else ex.journal.new_seq()
        wait_id, timeout_at = new_id(), now_ms() + timeout if timeout else None
        entry: dict[str, Any] = {"callSeq": seq, "kind": "wait", "key": key, "waitId": wait_id, "match": criteria}
        if timeout_at is not None:
            entry["timeoutAt"] = timeout_at
        if label:
            entry["label"] = label
        await ops.append(ex, [entry])
    if timeout_at is not None and now_ms() >= timeout_at:
        await ops.append(ex, [{"callSeq": seq, "kind": "event", "key": key, "waitId": wait_id}])
        return OK  # the deadline passed: None
    ex.waits.append(WaitRow(ex.run.id, wait_id, seq, key, criteria, timeout_at))
    if label:
        ex.wait_labels[wait_id] = label
    if ex.frames:
        return ops.pend(ex)
    await park(ops, ex)


# -- continue_as_new ---------------------------------------------------------------------------------------------


async def continue_as_new(ops: ScriptOps, ex: Execution, state: Any) -> NoReturn | Answer:
    """End this run as `{continued: true, continuedAsRunId}` and start its successor, in one transaction."""
    if ex.frames:
        return ops.error(
            ex, "invalid-input", "ctx.continue_as_new cannot be called inside ctx.parallel; call it after the block."
        )
    h = ops.services
    output = await h.engine.offload(_continue, h, ex, json_safe(state))
    h.engine.wake()
    raise Stop(Succeeded(output))


def _continue(h: Services, ex: Execution, state: Any) -> dict[str, Any]:
    """Blocking. The successor has a fresh id and journal and takes over the predecessor's place: its parent, the
    call it answers (which the predecessor stops answering, so no delivery path can answer that call with the
    hand-over), its queue, budget and source."""
    with h.db.transaction() as conn:
        run = h.runs.get(ex.run.id)
        successor = h.runs.enqueue(
            account_id=run.account_id,
            kind=run.kind,
            title=run.title,
            origin=run.origin,
            agent_id=run.agent_id,
            session_id=run.session_id,
            input={**run.input, "input": state},
            parent_run_id=run.parent_run_id,
            parent_tool_call_id=run.parent_tool_call_id,
            queue=run.queue,
            max_attempts=run.max_attempts,
            model=run.model,
            continued_from_run_id=run.id,
            trigger_firing_id=run.trigger_firing_id,
            budget=run.budget,
            source_text=run.source_text,
            source_cid=run.source_cid,
        )
        conn.execute("UPDATE runs SET parent_tool_call_id = NULL WHERE id = ?", (run.id,))
        output = {"continued": True, "continuedAsRunId": successor.id}
        h.engine.settle_now(run.id, Succeeded(output))
        if run.id in h.awaited_children:
            # An MCP client's delegate call here awaits the chain (`RunEngine.wait_for` follows it): the successor's
            # result is that call's to write, as the predecessor's would have been. The call forgets only the run
            # it spawned; the chain's own entries are moved along and dropped at its end (`ScriptExecutor.settled`).
            def hand_over() -> None:
                h.awaited_children.add(successor.id)
                if run.continued_from_run_id is not None:
                    h.awaited_children.discard(run.id)

            h.db.after_commit(hand_over)
    return output


# -- parking -----------------------------------------------------------------------------------------------------


async def park(ops: ScriptOps, ex: Execution) -> NoReturn:
    """Park on everything pending (open waits, timers, children still working); never returns. With only short
    timers pending, hold until the earliest and replay instead; with nothing pending any more, replay now."""
    h = ops.services
    if ex.timers and not ex.waits and not ex.waiting_on:
        remaining = min(ex.timers) - now_ms()
        if remaining < PARK_THRESHOLD_MS:
            if remaining > 0:
                await anyio.sleep(remaining / 1000)
            raise Replay()
    wait = await h.engine.offload(_park, h, ex)
    if wait is None:
        raise Replay()  # the children ended meanwhile: replay now and find every result
    raise Stop(Parked(wait))


def _park(h: Services, ex: Execution) -> dict[str, Any] | None:
    """Blocking; one transaction, so no child's end slips by between the check and the park, and the waits are
    registered exactly when the run is waiting on them."""
    with h.db.transaction() as conn:
        run = h.runs.get(ex.run.id)
        working = [rid for rid in ex.waiting_on if h.runs.get(rid).status not in TERMINAL]
        if not working and not ex.waits and not ex.timers:
            return None
        deadlines = ex.timers + [w.timeout_at for w in ex.waits if w.timeout_at is not None]
        deadline = min(deadlines) if deadlines else None
        wait: dict[str, Any]
        if ex.waits:
            first = ex.waits[0]
            wait = {"reason": "event", "waitId": first.wait_id}
            if deadline is not None:
                wait["timeoutAt"] = deadline
            if first.wait_id in ex.wait_labels:
                wait["label"] = ex.wait_labels[first.wait_id]
            answer_with = first.match.get("signal", "answer" if first.kind == "any" else None)
            if answer_with is not None:
                wait["answerWith"] = answer_with
        elif ex.timers:
            wait = {"reason": "timer", "wakeAt": deadline}
        else:
            wait = {"reason": "children", "childRunIds": working}
        if working and wait["reason"] != "children":
            wait["childRunIds"] = working  # the last child's end requeues the run too (resolve._wake_script_parent)
        if run.status in ("claimed", "running"):
            run_waits.replace(conn, run.id, run.account_id, ex.waits)
            h.runs.park(run.id, wait)
    return wait


__all__ = ["PARK_THRESHOLD_MS", "continue_as_new", "park", "sleep", "wait_for_event"]
