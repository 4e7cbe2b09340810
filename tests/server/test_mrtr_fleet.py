"""Stateless MCP across replicas (issue 21): a 2026-07-28 client's rounds and tasks on whichever replica they land.

Two harnesses on one PostgreSQL database and one data root, each with its own server, stand for two replicas behind
a load balancer. A `delegate` call lives on the replica that started it; its next round, sent to the other one,
unseals there (the store's shared key) and is relayed to the holder through the store (server/mrtr_relay.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.models.wire import Message, ModelRequest, ModelResponse
from mcp_harness.server import build_server
from mcp_harness.server.sampling import ClientSampler
from tests.models.test_sampling import (
    ANSWER,
    CAPS,
    Turns,
    answer,
    child_run,
    never,
    on_sampling,
    reply,
    requests_of,
    rounds,
)
from tests.store.harnesskit import settings_on
from tests.verbs.test_delegate_tasks import Ack, CancelTask, GetTask, TaskHandle, TaskIdParams, Tasks, TaskState

pytestmark = pytest.mark.anyio

RULES: list[dict[str, Any]] = [
    {"when": "Wait forever", "turns": [{"delayMs": 60_000, "text": "too late"}]},
    {"turns": [{"text": "done"}]},
]


@pytest.fixture
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Harness, Harness, str]]:
    """(A, B, a session of the default agent both serve): two replicas of one PostgreSQL store."""
    settings = settings_on(request, tmp_path, "postgres", RULES)
    a = Harness(settings)
    b = Harness(settings)
    session = a.sessions.create(a.account_id, a.agent().id)
    try:
        yield a, b, session.id
    finally:
        b.close()
        a.close()


def client(harness: Harness, session_id: str, **options: Any) -> Client:
    return Client(build_server(harness, session_id=session_id), mode="2026-07-28", **options)


async def test_a_round_retried_on_another_replica_reaches_the_call_and_brings_its_result(
    replicas: tuple[Harness, Harness, str],
) -> None:
    """Two model turns: the first round on A, both retries on B; the call stays on A, its result comes through B."""
    a, b, session = replicas
    on_sampling(a)
    arguments = {"brief": "Count on the fleet", "output": ANSWER}
    async with client(a, session, sampling_callback=never, sampling_capabilities=CAPS) as on_a:
        with anyio.fail_after(30):
            first = await rounds(on_a, arguments)
            (key,) = requests_of(first)
            assert isinstance(first, types.InputRequiredResult)
            async with client(b, session, sampling_callback=never, sampling_capabilities=CAPS) as on_b:
                use = {key: reply([("read", {"address": "~/self"})])}
                second = await rounds(on_b, arguments, input_responses=use, request_state=first.request_state)
                (again,) = requests_of(second)
                assert again != key and isinstance(second, types.InputRequiredResult)
                done = {again: reply([("return_result", {"answer": 7})], 1)}
                final = await rounds(on_b, arguments, input_responses=done, request_state=second.request_state)
                assert isinstance(final, types.CallToolResult) and final.structured_content is not None
                assert final.structured_content["output"] == {"answer": 7}
                # The call ended and its result was delivered: its row is gone, so a replay finds nothing.
                with pytest.raises(MCPError) as raised:
                    await rounds(on_b, arguments, input_responses=done, request_state=second.request_state)
                assert "no longer open here" in raised.value.error.message
    assert child_run(a).status == "succeeded"
    with a.db.reading() as conn:
        assert conn.execute("SELECT count(*) FROM mrtr_relay").fetchone()[0] == 0


async def test_another_callers_or_a_forged_state_is_refused_on_the_other_replica(
    replicas: tuple[Harness, Harness, str],
) -> None:
    """Another session's client gets the answer a gone call gets; an altered state does not unseal; the caller's
    own retry then still works."""
    a, b, session = replicas
    on_sampling(a)
    other = a.sessions.create(a.account_id, a.agent().id)
    arguments = {"brief": "Only mine", "output": ANSWER}
    async with client(a, session, sampling_callback=never, sampling_capabilities=CAPS) as on_a:
        with anyio.fail_after(30):
            first = await rounds(on_a, arguments)
            (key,) = requests_of(first)
            assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
            responses = {key: reply([("return_result", {"answer": 1})])}
            for session_id, state, why in [
                (other.id, first.request_state, "no longer open here"),
                (session, first.request_state[:-2] + "xx", "Invalid or expired requestState"),
            ]:
                async with client(b, session_id, sampling_callback=never, sampling_capabilities=CAPS) as on_b:
                    with pytest.raises(MCPError) as raised:
                        await rounds(on_b, arguments, input_responses=responses, request_state=state)
                assert raised.value.error.code == types.INVALID_PARAMS and why in raised.value.error.message
            async with client(b, session, sampling_callback=never, sampling_capabilities=CAPS) as on_b:
                final = await rounds(on_b, arguments, input_responses=responses, request_state=first.request_state)
    assert isinstance(final, types.CallToolResult) and final.structured_content is not None
    assert final.structured_content["output"] == {"answer": 1}


async def test_a_turn_running_on_the_other_replica_asks_the_client_through_the_call_held_elsewhere(
    replicas: tuple[Harness, Harness, str],
) -> None:
    """B's engine runs a turn of the tree whose call A holds: its request reaches the client in one of the call's
    rounds (answered here through B, relayed to A), and the client's answer comes back to the turn on B."""
    a, b, session = replicas
    on_sampling(a)
    turns: Turns = {
        "Held on A": [[("read", {"address": "~/self"})], [("return_result", {"answer": 4})]],
        "Asked on B": [["from the client's model"]],
    }
    arguments = {"brief": "Held on A", "output": ANSWER}
    got: list[ModelResponse] = []
    asked: list[str] = []
    async with client(a, session, sampling_callback=never, sampling_capabilities=CAPS) as on_a:
        with anyio.fail_after(30):
            result = await rounds(on_a, arguments)
            assert isinstance(a.sampler, ClientSampler)
            (held,) = a.sampler.calls.calls.values()
            async with client(b, session, sampling_callback=never, sampling_capabilities=CAPS) as on_b:
                assert isinstance(b.sampler, ClientSampler)
                sampler = b.sampler
                request = ModelRequest(
                    model="client-model",
                    system="",
                    messages=(Message(role="user", content="Asked on B"),),
                    context_key=child_run(a).session_id or "",
                )

                async def ask_on_b() -> None:
                    got.append(await sampler.create_message(request))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(ask_on_b)
                    while len(held.pending) < 2:  # the holder took the turn's request as one of its own
                        await anyio.sleep(0.02)
                    while isinstance(result, types.InputRequiredResult):
                        requests = requests_of(result)
                        asked += [p.messages[0].content.text for p in requests.values()]  # pyright: ignore
                        responses: types.InputResponses = {k: answer(turns, p) for k, p in requests.items()}
                        result = await rounds(
                            on_b, arguments, input_responses=responses, request_state=result.request_state
                        )
    assert [r.text for r in got] == ["from the client's model"]
    assert "Asked on B" in asked
    assert isinstance(result, types.CallToolResult) and result.structured_content is not None
    assert result.structured_content["output"] == {"answer": 4}


async def test_cancelling_a_round_on_the_other_replica_cancels_the_call_on_its_holder(
    replicas: tuple[Harness, Harness, str],
) -> None:
    """The child's answer starts a grandchild that waits long, so the round relayed through B waits; the client gives
    up on that round, and the call on A is canceled with its tree, as when a local round is canceled."""
    a, b, session = replicas
    a.agents.create(a.account_id, normalize_definition({**a.default_definition().to_json(), "name": "slow"}))
    on_sampling(a)
    arguments = {"brief": "Start a slow one"}
    async with client(a, session, sampling_callback=never, sampling_capabilities=CAPS) as on_a:
        with anyio.fail_after(30):
            first = await rounds(on_a, arguments)
            (key,) = requests_of(first)
            assert isinstance(first, types.InputRequiredResult)
            slow = {key: reply([("delegate", {"brief": "Wait forever", "agentId": "slow"})])}
            async with client(b, session, sampling_callback=never, sampling_capabilities=CAPS) as on_b:
                with anyio.move_on_after(1.0) as waited:
                    await rounds(on_b, arguments, input_responses=slow, request_state=first.request_state)
                assert waited.cancelled_caught
            while child_run(a).status != "canceled":
                await anyio.sleep(0.05)
    assert a.sampler is not None and isinstance(a.sampler, ClientSampler) and not a.sampler.calls.calls


async def test_a_task_started_on_one_replica_is_read_and_canceled_on_the_other(
    replicas: tuple[Harness, Harness, str],
) -> None:
    a, b, session = replicas
    async with client(a, session, extensions=[Tasks()]) as on_a, client(b, session, extensions=[Tasks()]) as on_b:
        with anyio.fail_after(30):
            handle = await on_a.session.call_tool("delegate", {"brief": "Wait forever"}, allow_claimed=True)
            assert isinstance(handle, TaskHandle)
            params = TaskIdParams(task_id=handle.task_id)
            seen = await on_b.session.send_request(GetTask(params=params), TaskState)
            assert seen.task_id == handle.task_id and seen.status == "working"
            ack = await on_b.session.send_request(CancelTask(params=params), Ack)
            assert ack.model_extra == {"resultType": "complete"}
            while (now := await on_b.session.send_request(GetTask(params=params), TaskState)).status == "working":
                await anyio.sleep(0.05)
    assert now.status == "cancelled"
    assert a.runs.get(handle.task_id).status == "canceled"
