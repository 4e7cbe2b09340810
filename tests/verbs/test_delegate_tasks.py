"""`delegate` as an MCP task (the Tasks extension, SEP-2663), driven by the SDK client.

The client declares `io.modelcontextprotocol/tasks` through a real `ClientExtension` whose claim on the `task` result
type polls `tasks/get` until the task ends, exactly as a tasks-capable client would; without the extension (or on
the handshake-era wire) the call is held open as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from mcp_harness.verbs.contracts import TASKS_EXTENSION

pytestmark = pytest.mark.anyio

ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
RULES: list[dict[str, Any]] = [
    {
        "when": "Compute slowly",
        "turns": [{"delayMs": 600, "toolCalls": [{"name": "return_result", "input": {"answer": 42}}]}],
    },
    {"when": "Wait forever", "turns": [{"delayMs": 60_000, "text": "too late"}]},
    {"turns": [{"text": "default reply"}]},
]


class TaskHandle(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str
    status: str


class TaskIdParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] | None = None


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams


class Ack(types.Result):
    """An empty acknowledgement (`tasks/cancel`, `tasks/update`)."""

    model_config = ConfigDict(extra="allow")


class TaskState(types.Result):
    """`tasks/get` / `tasks/cancel` answers (SEP-2663 DetailedTask)."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    poll_interval_ms: int | None = None
    ttl_ms: int | None = None
    result: dict[str, Any] | None = None


class Tasks(ClientExtension):
    """A tasks-capable client: resolves a task handle by polling `tasks/get`, recording every status it saw."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.seen: list[str] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
        self.seen.append(handle.status)
        with anyio.fail_after(20):
            while True:
                params = TaskIdParams(task_id=handle.task_id)
                task = await ctx.session.send_request(GetTask(params=params), TaskState)
                self.seen.append(task.status)
                if task.status != "working":
                    return types.CallToolResult.model_validate(task.result)
                await anyio.sleep((task.poll_interval_ms or 500) / 1000)


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    """The script of conftest.py's `scripted` harness."""
    return RULES


@pytest.fixture
def tasks() -> Tasks:
    return Tasks()


@pytest.fixture
async def client(scripted: Harness, tasks: Tasks) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="2026-07-28", extensions=[tasks]) as c:
        yield c


def _results_for(harness: Harness, run_id: str) -> int:
    run = harness.runs.get(run_id)
    parent = harness.sessions.get(run.session_id or "").parent_session_id or ""
    events = [e for e in harness.sessions.events(parent) if e.payload.get("type") == "tool_result"]
    return sum(1 for e in events if e.payload.get("toolCallId") == run.parent_tool_call_id)


async def test_a_tasks_client_gets_a_handle_and_polls_it_to_the_typed_result(
    client: Client, tasks: Tasks, scripted: Harness
) -> None:
    result = await client.call_tool("delegate", {"brief": "Compute slowly", "output": ANSWER})
    assert not result.is_error
    data = result.structured_content
    assert isinstance(data, dict) and data["status"] == "succeeded" and data["output"] == {"answer": 42}
    assert tasks.seen[0] == "working" and tasks.seen[-1] == "completed" and "working" in tasks.seen[1:]
    # The engine answered the parent's logged delegate call exactly once.
    with anyio.fail_after(5):
        while _results_for(scripted, data["runId"]) == 0:
            await anyio.sleep(0.05)
    assert _results_for(scripted, data["runId"]) == 1


async def test_a_task_can_be_cancelled_and_read_back(client: Client, scripted: Harness) -> None:
    handle = await client.session.call_tool("delegate", {"brief": "Wait forever"}, allow_claimed=True)
    assert isinstance(handle, TaskHandle) and handle.status == "working"
    extra = handle.model_extra or {}
    assert extra["ttlMs"] is None and extra["pollIntervalMs"] == 500, "SEP-2663 names: ttlMs, pollIntervalMs"
    params = TaskIdParams(task_id=handle.task_id)
    ack = await client.session.send_request(CancelTask(params=params), Ack)
    assert ack.model_extra == {"resultType": "complete"}, "tasks/cancel answers an empty acknowledgement"
    with anyio.fail_after(10):
        while (again := await client.session.send_request(GetTask(params=params), TaskState)).status == "working":
            await anyio.sleep(0.05)
    assert again.status == "cancelled" and again.task_id == handle.task_id and again.result is None
    assert scripted.runs.get(handle.task_id).status == "canceled"


async def test_tasks_update_is_acknowledged_since_a_child_never_asks_for_input(client: Client) -> None:
    handle = await client.session.call_tool("delegate", {"brief": "Wait forever"}, allow_claimed=True)
    assert isinstance(handle, TaskHandle)
    update = UpdateTask(params=UpdateParams(task_id=handle.task_id, input_responses={"never-issued": {}}))
    ack = await client.session.send_request(update, Ack)
    assert ack.model_extra == {"resultType": "complete"}
    with pytest.raises(MCPError) as info:
        await client.session.send_request(UpdateTask(params=UpdateParams(task_id="no-such-run")), Ack)
    assert info.value.error.code == types.INVALID_PARAMS and "No task no-such-run" in info.value.error.message
    await client.session.send_request(CancelTask(params=TaskIdParams(task_id=handle.task_id)), Ack)


async def test_task_requests_without_the_extension_name_the_missing_capability(scripted: Harness) -> None:
    async with Client(build_server(scripted), mode="2026-07-28") as plain:
        for request in (
            GetTask(params=TaskIdParams(task_id="x")),
            CancelTask(params=TaskIdParams(task_id="x")),
            UpdateTask(params=UpdateParams(task_id="x")),
        ):
            with pytest.raises(MCPError) as info:
                await plain.session.send_request(request, Ack)
            assert info.value.error.code == -32021
            assert info.value.error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


async def test_tasks_of_other_sessions_or_unknown_ids_are_not_found(client: Client, scripted: Harness) -> None:
    with pytest.raises(MCPError) as info:
        await client.session.send_request(GetTask(params=TaskIdParams(task_id="no-such-run")), TaskState)
    assert "No task no-such-run" in str(info.value)


async def test_a_refused_delegate_is_an_error_result_not_a_task(client: Client) -> None:
    result = await client.call_tool("delegate", {"brief": "x", "prompt": "p", "agentId": "a"})
    assert result.is_error and "either prompt or agentId" in result.content[0].text  # pyright: ignore[reportAttributeAccessIssue]


async def test_without_the_extension_the_call_is_held_open(scripted: Harness) -> None:
    async with Client(build_server(scripted), mode="2026-07-28") as plain:
        with anyio.fail_after(20):
            result = await plain.call_tool("delegate", {"brief": "Compute slowly", "output": ANSWER})
    assert isinstance(result.structured_content, dict) and result.structured_content["output"] == {"answer": 42}
