"""Children report back: a finished child's result lands on its parent's session exactly once, the parent is
requeued when its last child resolves, plan steps settle, and interrupted calls are answered (HARNESS §6–§8).

Each delivery is one transaction that checks for an existing result first, so a crash at any point, followed by
the boot reconciliation, delivers every result once and only once. Every logged call gets its answer: at boot, the
calls left open by instances that are gone (read from `open_calls`, never from the logs) are answered before the
engine claims anything (`answer_orphaned`), and before a turn its session's leftovers are (`reconcile_session`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from mcp_harness.runs.outcomes import INTERRUPTED
from mcp_harness.services import Runs, Stores
from mcp_harness.store import instances
from mcp_harness.verbs.delegate import result_of
from mcp_harness.verbs.plan import mark_done_by_runtime, settle

if TYPE_CHECKING:
    from mcp_harness.store.open_calls import OpenCall
    from mcp_harness.store.port import Connection
    from mcp_harness.store.runs import RunRecord
    from mcp_harness.store.sessions import Actor

logger = logging.getLogger(__name__)

LIVE = ("queued", "claimed", "running", "waiting")
TERMINAL = ("succeeded", "failed", "canceled")
LATE_NOTICE = (
    "Result accepted, but the task that delegated this one had already stopped waiting for it — nothing was "
    "delivered upstream."
)


class RunHost(Stores, Runs, Protocol):
    """The stores and the run engine: all that delivering a result, waking a parent or answering a call touches."""


def _unanswered_calls(host: RunHost, session_id: str) -> list[OpenCall]:
    """Non-user tool calls of the session without a result, in order."""
    return [call for call in host.sessions.open_calls(session_id) if call.actor != "user"]


def parent_session_of(host: RunHost, child: RunRecord) -> str | None:
    """The session whose delegate call a child answers: its own session's parent, or, for a script child (which
    has no session), the `parentSessionId` recorded when it was spawned."""
    if child.session_id is not None:
        return host.sessions.parent_of(child.session_id)
    recorded = child.input.get("parentSessionId")
    return recorded if isinstance(recorded, str) else None


def _child_for(host: RunHost, session_id: str, call_id: str) -> RunRecord | None:
    with host.db.reading() as conn:
        row = conn.execute(
            "SELECT r.id FROM runs r LEFT JOIN sessions s ON s.id = r.session_id WHERE r.parent_tool_call_id = ? "
            "AND (s.parent_session_id = ? OR r.session_id IS NULL) ORDER BY r.created_at DESC LIMIT 1",
            (call_id, session_id),
        ).fetchone()
    child = None if row is None else host.runs.find(row[0])
    if child is not None and child.session_id is None and child.input.get("parentSessionId") != session_id:
        return None
    return child


def _wake_script_parent(host: RunHost, child: RunRecord) -> str | None:
    """A script's model child answers no transcript call: its end requeues the script parked on it, which then
    replays and finds the result on the child's row. Returns the parent run id when it was requeued."""
    if child.parent_run_id is None:
        return None
    with host.db.transaction():
        parent = host.runs.find(child.parent_run_id)
        if parent is None or parent.kind != "workflow" or parent.status != "waiting":
            return None
        waiting_on: list[str] = (parent.wait or {}).get("childRunIds") or []
        if child.id not in waiting_on:
            return None
        others = (host.runs.find(rid) for rid in waiting_on if rid != child.id)
        if any(other is not None and other.status not in TERMINAL for other in others):
            return None  # a parallel block parks on all its children: the last of them wakes it
        host.runs.requeue(parent.id)
        return parent.id


def pending_spawns(host: RunHost, session_id: str) -> set[str]:
    """Delegate calls on the session whose child is still live."""
    pending: set[str] = set()
    for call in _unanswered_calls(host, session_id):
        if call.name == "delegate":
            child = _child_for(host, session_id, call.call_id)
            if child is not None and child.status in LIVE:
                pending.add(call.call_id)
    return pending


def reconcile_session(host: RunHost, session_id: str, *, interrupted_text: str = INTERRUPTED) -> bool:
    """Before a turn: deliver children that finished unheard, and answer calls a restart interrupted. A call
    another live process opened (a client bound to this session there) is still running: it is left alone.
    False when the session had no call open at all (then nothing is pending either: the turn need not look again).
    """
    calls = _unanswered_calls(host, session_id)
    if not calls:
        return False
    mine = host.db.instance_id
    others = {c.instance_id for c in calls if c.instance_id is not None and c.instance_id != mine}
    if others:
        with host.db.reading() as conn:
            working = instances.alive(conn, others)
        calls = [c for c in calls if c.instance_id not in working]
    for call in calls:
        _answer(host, call, interrupted_text)
    return True


def answer_orphaned(host: RunHost, live: frozenset[str]) -> None:
    """The boot hook (`RunEngine.serve(at_boot=…)`): in the boot sweep's transaction, before anything is claimed,
    every call in every session that an instance now gone left open gets its answer, once, from `system` — a
    finished child's result, else the interrupted error — unless a run will still answer it: a delegate (model,
    task or script child) whose child run is live. Reads only the open calls, never the logs. Blocking."""
    for call in host.sessions.orphaned_calls(live):
        try:
            with host.db.transaction():  # a savepoint: one call that cannot be answered leaves the others be
                _answer(host, call, INTERRUPTED)
        except Exception:
            logger.exception("answering call %s of session %s at boot failed", call.call_id, call.session_id)


def _answer(host: RunHost, call: OpenCall, interrupted_text: str) -> None:
    if call.name == "delegate":
        child = _child_for(host, call.session_id, call.call_id)
        if child is not None and child.status in LIVE:
            return
        if child is not None:
            deliver(host, child)
            return
    event = {"type": "tool_result", "toolCallId": call.call_id, "name": call.name, "error": interrupted_text}
    with host.db.transaction():
        if call.call_id not in host.sessions.answered_calls(call.session_id, [call.call_id]):
            host.sessions.append(call.session_id, event, "system")


def deliver(host: RunHost, child: RunRecord) -> str | None:
    """Append the child's result on the parent's session (once) and requeue the parent if it was waiting on its
    last child. Returns the parent run id when it was requeued. Blocking; one transaction."""
    if child.parent_tool_call_id is None:
        return _wake_script_parent(host, child)
    if child.parent_run_id is None and child.id in host.awaited_children:
        return None  # an MCP client's delegate call in this process is waiting and writes its own result
    with host.db.transaction() as conn:
        return _deliver_in(host, conn, child)


def deliver_within(host: RunHost, child: RunRecord) -> str | None:
    """`deliver` in the caller's open transaction, without a savepoint of its own: for the engine's terminal
    effects, whose savepoint around them already undoes all of a failed delivery (one savepoint per child fewer)."""
    if child.parent_tool_call_id is None or (child.parent_run_id is None and child.id in host.awaited_children):
        return deliver(host, child)
    with host.db.reading() as conn:
        if not conn.in_transaction:
            raise RuntimeError("deliver_within needs the caller's open transaction.")
        return _deliver_in(host, conn, child)


def _deliver_in(host: RunHost, conn: Connection, child: RunRecord) -> str | None:
    """`deliver`'s body, in `conn`'s open transaction (a savepoint of the caller's, or its own)."""
    parent_session = parent_session_of(host, child)
    if parent_session is None:
        return None
    return deliver_siblings_in(host, conn, child.parent_run_id, parent_session, [child])


def deliver_siblings_in(
    host: RunHost, conn: Connection, parent_run_id: str | None, parent_session: str, children: list[RunRecord]
) -> str | None:
    """The results of `children`, delegate calls of `parent_session` (that of `parent_run_id`, or of an MCP client
    when None), appended in one append, in `conn`'s open transaction; the parent requeued when that answered the
    last call it waits on (its id returned then). A child whose call has its result already gets the late notice.
    One child, or a batch's siblings ending together (runs/settle_batch.py)."""
    # The parent's status and wait only: decoding its whole row (its brief, its plan) for each child's delivery
    # is what a wide fan-out would pay a hundred times.
    parent = host.runs.status_of(parent_run_id) if parent_run_id is not None else None
    waiting_on: list[str] = []
    if parent is not None and parent[0] == "waiting":
        waiting_on = (parent[1] or {}).get("toolCallIds") or []
    # One scan of the parent's results answers both questions: is this call answered, and, once it is, are all
    # the calls the parent waits on?
    calls = [c.parent_tool_call_id for c in children if c.parent_tool_call_id is not None]
    answered = host.sessions.answered_calls(parent_session, [*calls, *waiting_on])
    results: list[tuple[dict[str, Any], Actor]] = []
    delivered: set[str] = set()
    for child in children:
        call_id = child.parent_tool_call_id
        assert call_id is not None
        if call_id in answered or call_id in delivered:
            if child.status == "succeeded" and child.session_id is not None:
                late = {"type": "message", "role": "user", "content": LATE_NOTICE}
                host.sessions.append(child.session_id, late, "system")
            continue
        delivered.add(call_id)
        event = {"type": "tool_result", "toolCallId": call_id, "name": "delegate", "output": result_of(child)}
        results.append((event, "system"))
    if results:
        host.sessions.append_many_within(conn, parent_session, results)  # in the one transaction or savepoint
    # Without a parent run (a client's delegate whose caller is gone, a restart) the result is on record for it.
    if delivered and parent is not None and parent[0] == "waiting" and set(waiting_on) <= answered | delivered:
        assert parent_run_id is not None
        host.runs.requeue(parent_run_id)
        return parent_run_id
    return None


def has_plan_step(child: RunRecord) -> bool:
    """Whether `settle_plan_step` has anything to look at for `child` (most children are attached to no step)."""
    return child.status == "succeeded" and bool(child.input.get("planStepId")) and child.parent_run_id is not None


def settle_plan_step(host: RunHost, child: RunRecord) -> None:
    """When all children attached to a running plan step succeeded, the runtime marks it done (never failed)."""
    if not has_plan_step(child):
        return
    step_id, parent_run_id = child.input["planStepId"], child.parent_run_id
    assert parent_run_id is not None  # `has_plan_step` checked it
    parent = host.runs.find(parent_run_id)
    if parent is not None and parent.kind == "workflow":
        return  # a script's model child: its step belongs to the script's plan, which ctx.step closes
    parent_session = parent_session_of(host, child)
    if parent_session is None:
        return
    with host.db.transaction():
        siblings = [c for c in host.runs.children(parent_run_id) if c.input.get("planStepId") == step_id]
        if not siblings or any(c.status != "succeeded" for c in siblings):
            return
        plan = host.sessions.get_plan(parent_session)
        if plan is None:
            return
        marked = mark_done_by_runtime(plan, step_id)
        if marked is not None:
            host.sessions.set_plan(parent_session, settle(plan, marked, plan.get("ownerRunId")))


async def on_finalized(host: RunHost, run: RunRecord) -> None:
    """Engine hook: a run reached a terminal status.

    Agent runs need nothing here: their executor settles the plan step and delivers in the terminal commit's own
    transaction (`AgentExecutor.settled`). This covers runs of a kind whose executor does not."""
    if host.engine.applies_terminal_effects(run.kind):
        return

    def settle_and_deliver() -> str | None:
        settle_plan_step(host, run)
        return deliver(host, run)

    try:
        requeued = await host.engine.offload(settle_and_deliver)
    except Exception:
        logger.exception("delivering the result of run %s failed; the boot reconciliation will retry", run.id)
        return
    if requeued is not None:
        host.engine.wake()


async def reconcile_at_boot(host: RunHost) -> None:
    """After the boot sweep: deliver children that finished while their parents' delivery was cut short.

    Only children whose call is still open: one already answered needs nothing (delivering it again would only
    leave a late-result notice in its session at every boot), and the open calls are few however long the history.
    """

    def owed(child: RunRecord) -> bool:
        if child.parent_tool_call_id is None:
            return True  # a script's model child: its end wakes the script, which answers no call
        parent_session = parent_session_of(host, child)
        return parent_session is not None and not host.sessions.answered_calls(
            parent_session, [child.parent_tool_call_id]
        )

    def work() -> list[str]:
        requeued: list[str] = []
        for parent in host.runs.waiting_on_children():
            for child in host.runs.children(parent.id):
                if child.status in TERMINAL and owed(child):
                    rid = deliver(host, child)
                    if rid:
                        requeued.append(rid)
        # Children of MCP clients' delegate calls that ended while the server was down or just before it died.
        with host.db.reading() as conn:
            orphans = [
                row[0]
                for row in conn.execute(
                    "SELECT r.id FROM open_calls c JOIN runs r ON r.parent_tool_call_id = c.call_id "
                    "WHERE c.name = 'delegate' AND r.parent_run_id IS NULL "
                    "AND r.status IN ('succeeded', 'failed', 'canceled')"
                )
            ]
        for run_id in orphans:
            child = host.runs.find(run_id)
            if child is not None:
                deliver(host, child)
        return requeued

    if await host.engine.offload(work):
        host.engine.wake()
