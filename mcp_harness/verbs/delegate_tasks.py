"""`delegate` as a task (the MCP Tasks extension, `io.modelcontextprotocol/tasks`, SEP-2663).

A client that declares the extension gets a task handle from `delegate` instead of a call held open: the child is
spawned exactly as for an awaited call, and the handle is the child's run id. Because every child is a durable run,
a task outlives the connection and the server process: `tasks/get` reads the run row, so a client may poll after a
restart, and the child's result is also written to the parent session's log exactly once by the engine (the same
path that answers a client that went away). `tasks/cancel` cancels the run tree.

Task status follows the run: live runs are `working`; a finished child — succeeded or failed — `completed`, with the
delegate result (`{status, runId, sessionId, output | error}`) as the task's tool result, exactly what a held-open
call would have returned; a canceled child `cancelled`. A task is `failed` only when the call itself was refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_harness.errors import HarnessError, NotFound
from mcp_harness.runs.records import TERMINAL, RunRecord
from mcp_harness.store._util import iso_time
from mcp_harness.verbs.base import VerbContext
from mcp_harness.verbs.contracts import TASKS_EXTENSION
from mcp_harness.verbs.delegate import Spawned, render_result, result_of, spawn_for_client

if TYPE_CHECKING:
    from mcp_harness.services import Runs, Stores

POLL_INTERVAL_MS = 500


async def start(ctx: VerbContext, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, HarnessError | None]:
    """Log the delegate call and spawn its child; the task handle, or the refusal (logged as the call's result)."""
    services = ctx.services

    async def spawn(call_ctx: VerbContext) -> Spawned:
        spawned = await spawn_for_client(call_ctx, arguments)
        if not isinstance(spawned, Spawned):
            raise AssertionError("a detached delegate is never made a task")
        services.engine.wake()
        return spawned

    spawned, error = await services.start_async(ctx, "delegate", arguments, spawn)
    if spawned is None:
        return None, error
    run = await services.engine.offload(services.runs.get, spawned.run_id)
    return task_of(run), None


def task_of(run: RunRecord) -> dict[str, Any]:
    """The Task shape of a child run (SEP-2663 `DetailedTask`), with its result once it has one."""
    if run.status == "canceled":
        status, message = "cancelled", "The child was canceled."
    elif run.status in TERMINAL:
        status, message = "completed", f"The child {run.status}."
    else:
        status, message = "working", f"The child is {run.status}."
    task: dict[str, Any] = {
        "taskId": run.id,
        "status": status,
        "statusMessage": message,
        "createdAt": iso_time(run.created_at),
        "lastUpdatedAt": iso_time(run.finished_at or run.started_at or run.created_at),
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    if status == "completed":
        rendered = render_result(result_of(run))
        task["result"] = {
            "content": [{"type": "text", "text": rendered.text}],
            "structuredContent": rendered.data,
            "isError": False,
        }
    return task


def client_task(stores: Stores, session_id: str | None, task_id: str) -> RunRecord:
    """The run behind a task id, if this session's client started it (404 otherwise, whatever the reason)."""
    missing = NotFound(f"No task {task_id} for this session.")
    if session_id is None:
        raise missing
    try:
        run = stores.runs.chain_end(task_id)  # a continued script's task is its last successor's
    except NotFound:
        raise missing from None
    if run.account_id != stores.account_id or run.parent_run_id is not None or run.parent_tool_call_id is None:
        raise missing
    if _parent_session(stores, run) != session_id:
        raise missing
    return run


def _parent_session(stores: Stores, run: RunRecord) -> str | None:
    parent = run.input.get("parentSessionId")
    if isinstance(parent, str):
        return parent
    if run.session_id is None:
        return None
    return stores.sessions.get(run.session_id).parent_session_id


async def cancel(host: Runs, run: RunRecord) -> None:
    """Cancel the child's tree. The ack does not wait: queued and parked runs end at once, a run mid model call at
    its next step, and `tasks/get` shows where it stands (SEP-2663: cancellation is eventually consistent)."""
    if run.status not in TERMINAL:
        await host.engine.cancel(run.id)


__all__ = ["POLL_INTERVAL_MS", "TASKS_EXTENSION", "cancel", "client_task", "start", "task_of"]
