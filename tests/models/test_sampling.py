"""The `sampling` provider in both protocol eras, through the SDK's real client.

2025-11-25: the server sends `sampling/createMessage` on the client's session. 2026-07-28: the open `delegate` call
answers `InputRequiredResult` with the tree's waiting requests and the client re-sends it with `inputResponses`
(SEP-2322); the SDK client does that by itself with its `sampling_callback`. Where no call can carry them, delegate
refuses at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import ClientExtension, ResultClaim
from mcp.client.session import SamplingFnT
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.models import clients
from mcp_harness.models.sampling import SamplingClient
from mcp_harness.runs.records import RunRecord
from mcp_harness.server import build_server, http_app
from mcp_harness.verbs.contracts import TASKS_EXTENSION
from tests.conftest import call, owner_and_other, refused, scripted_harness, serving

pytestmark = pytest.mark.anyio

ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
CAPS = types.SamplingCapability(tools=types.SamplingToolsCapability())
Reply = types.CreateMessageResultWithTools
Turns = dict[str, list[list[Any]]]
"""Per brief, the blocks of each reply in turn: a `(name, input)` pair is a tool use, a string is text."""


def on_sampling(harness: Harness, name: str | None = None) -> None:
    """Put the agent (default: the default agent) on the `sampling` provider: the client's own model."""
    agent = harness.agent(name)
    raw = {**agent.definition.to_json(), "modelProvider": "sampling", "model": "client-model"}
    harness.agents.update(agent.id, normalize_definition(raw))


def reply(blocks: list[Any], n: int = 0) -> Reply:
    content: list[Any] = []
    for i, b in enumerate(blocks):
        if isinstance(b, str):
            content.append(types.TextContent(type="text", text=b))
        else:
            content.append(types.ToolUseContent(name=b[0], id=f"use-{n}-{i}", input=b[1]))
    uses = any(not isinstance(b, str) for b in blocks)
    return Reply(role="assistant", content=content, model="client-model", stop_reason="toolUse" if uses else "endTurn")


def brief_of(params: types.CreateMessageRequestParams) -> str:
    first = params.messages[0].content
    return first.text if isinstance(first, types.TextContent) else ""


def turn_of(params: types.CreateMessageRequestParams) -> int:
    return sum(1 for m in params.messages if m.role == "assistant")


def answer(turns: Turns, params: types.CreateMessageRequestParams) -> Reply:
    """The scripted client model's reply to one request: by its brief and how many replies it already holds."""
    return reply(turns[brief_of(params)][turn_of(params)], turn_of(params))


def model(turns: Turns, seen: list[types.CreateMessageRequestParams]) -> SamplingFnT:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> Reply:
        seen.append(params)
        return answer(turns, params)

    return sample


async def never(context: Any, params: types.CreateMessageRequestParams) -> Reply:
    raise AssertionError("these rounds are answered by hand")


async def rounds(c: Client, arguments: dict[str, Any], **kw: Any) -> Any:
    """One `delegate` round driven by hand: the `InputRequiredResult` (or final result) as the server sent it."""
    return await c.session.call_tool("delegate", arguments, allow_input_required=True, **kw)


def requests_of(result: Any) -> dict[str, types.CreateMessageRequestParams]:
    assert isinstance(result, types.InputRequiredResult), result
    assert result.input_requests and result.request_state
    out: dict[str, types.CreateMessageRequestParams] = {}
    for key, request in result.input_requests.items():
        assert isinstance(request, types.CreateMessageRequest)
        out[key] = request.params
    return out


def child_run(harness: Harness) -> RunRecord:
    """The client's child (the root of its tree)."""
    runs = [harness.runs.get(s.run_id) for s in harness.sessions.list(harness.account_id) if s.run_id]
    (root,) = [r for r in runs if r.parent_run_id is None]
    return root


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(load_settings(data_dir=tmp_path / "data"))
    on_sampling(h)
    h.engine.retry_base_ms = 10  # a retried turn starts again at once
    yield h
    h.close()


# -- the client's model serves the child, in both eras -----------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_child_on_the_sampling_provider_runs_on_the_clients_model(harness: Harness, mode: str) -> None:
    """Two model turns (a tool call, then the typed result): in 2026-07-28 each is one round of the delegate call."""
    seen: list[types.CreateMessageRequestParams] = []
    turns: Turns = {"How many?": [[("read", {"address": "~/self"})], [("return_result", {"answer": 3})]]}
    notes: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async with Client(
        build_server(harness), mode=mode, sampling_callback=model(turns, seen), sampling_capabilities=CAPS
    ) as c:
        if mode == "legacy":
            await c.list_tools()  # the handshake-era sampler is the latest session that declared sampling
        with anyio.fail_after(30):
            result = await c.call_tool("delegate", {"brief": "How many?", "output": ANSWER}, progress_callback=progress)
    assert result.structured_content is not None, result.content
    assert result.structured_content["status"] == "succeeded" and result.structured_content["output"] == {"answer": 3}
    assert len(seen) == 2 and "return_result" in [t.name for t in seen[0].tools or []]
    assert seen[0].system_prompt is not None and "<space>" in seen[0].system_prompt
    last = seen[1].messages[-1]
    assert last.role == "user" and isinstance(last.content, list)
    assert isinstance(last.content[0], types.ToolResultContent) and last.content[0].tool_use_id == "use-0-0"
    assert notes and notes[0].startswith('Started child "How many?"')


async def test_children_sampling_at_once_are_asked_in_one_round(harness: Harness) -> None:
    """A child fans out to three grandchildren on the client's model: their three requests share one result, and
    the whole tree under the open call reaches the model."""
    turns: Turns = {
        "Fan out": [[("delegate", {"brief": f"Leaf {i}"}) for i in range(3)], [("return_result", {"answer": 3})]],
        **{f"Leaf {i}": [[f"leaf {i} done"]] for i in range(3)},
    }
    sizes: list[int] = []
    async with Client(
        build_server(harness), mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS
    ) as c:
        arguments = {"brief": "Fan out", "output": ANSWER}
        with anyio.fail_after(30):
            result = await rounds(c, arguments)
            while isinstance(result, types.InputRequiredResult):
                asked = requests_of(result)
                sizes.append(len(asked))
                responses: types.InputResponses = {k: answer(turns, p) for k, p in asked.items()}
                result = await rounds(c, arguments, input_responses=responses, request_state=result.request_state)
    assert sizes == [1, 3, 1]
    assert result.structured_content is not None and result.structured_content["output"] == {"answer": 3}
    grandchildren = harness.runs.children(child_run(harness).id)
    assert len(grandchildren) == 3 and all(r.status == "succeeded" for r in grandchildren)


async def test_a_detached_child_started_under_the_call_cannot_use_it(harness: Harness) -> None:
    """A run's `await: false` child outlives the call, so it has no way to the client's model: it fails saying so
    (and its requests never reach the client), while the call's own child carries on."""
    seen: list[types.CreateMessageRequestParams] = []
    turns: Turns = {"Start one": [[("delegate", {"brief": "Detached", "await": False})], ["started it"]]}
    async with Client(
        build_server(harness), mode="2026-07-28", sampling_callback=model(turns, seen), sampling_capabilities=CAPS
    ) as c:
        with anyio.fail_after(30):
            done = await call(c, "delegate", {"brief": "Start one"})
            assert done["status"] == "succeeded", done
            (detached,) = harness.runs.children(done["runId"])
            while not harness.runs.get(detached.id).terminal:
                await anyio.sleep(0.05)
    detached = harness.runs.get(detached.id)
    assert detached.status == "failed" and detached.error is not None
    assert "detached child" in detached.error["message"] and "mcp-harness provider add" in detached.error["message"]
    assert [brief_of(p) for p in seen] == ["Start one", "Start one"]


# -- what a waiting turn does with late, stale and foreign answers -------------------------------------------------


def first_turn_times_out(monkeypatch: pytest.MonkeyPatch, *, every: bool = False) -> None:
    """The first attempt's wait for its reply is 0.2 s (every attempt's, with `every`); later ones wait as usual."""
    made: list[int] = []

    def make(sampler: Any, *, name: str) -> SamplingClient:
        made.append(1)
        return SamplingClient(sampler, name=name, timeout_s=0.2 if every or len(made) == 1 else 600.0)

    monkeypatch.setattr(clients, "SamplingClient", make)


async def test_a_stale_answer_is_never_fed_into_the_retried_turn(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client answers after the turn stopped waiting: the run retried and asked anew, and the late answer to the
    old request is dropped; the new request is asked in its place."""
    first_turn_times_out(monkeypatch)
    arguments = {"brief": "Answer me", "output": ANSWER}
    async with Client(
        build_server(harness), mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS
    ) as c:
        with anyio.fail_after(30):
            first = await rounds(c, arguments)
            (old_key,) = requests_of(first)
            while child_run(harness).attempt < 2:  # the first attempt timed out; the retry is under way
                await anyio.sleep(0.02)
            stale = {old_key: reply([("return_result", {"answer": 1})])}
            second = await rounds(c, arguments, input_responses=stale, request_state=first.request_state)
            (new_key,) = requests_of(second)
            assert new_key != old_key
            fresh = {new_key: reply([("return_result", {"answer": 2})])}
            assert isinstance(second, types.InputRequiredResult)
            final = await rounds(c, arguments, input_responses=fresh, request_state=second.request_state)
    assert isinstance(final, types.CallToolResult) and final.structured_content is not None
    assert final.structured_content["output"] == {"answer": 2}
    assert child_run(harness).attempt == 2


async def test_a_client_that_never_comes_back_fails_the_child_through_its_retries(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody answers: every attempt's wait runs out, the run fails as any provider failure does, and a client that
    finally comes back gets that result (its answer to a request long gone is dropped)."""
    first_turn_times_out(monkeypatch, every=True)
    arguments = {"brief": "Answer me", "output": ANSWER}
    async with Client(
        build_server(harness), mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS
    ) as c:
        with anyio.fail_after(30):
            first = await rounds(c, arguments)
            (key,) = requests_of(first)
            while not child_run(harness).terminal:
                await anyio.sleep(0.05)
            run = child_run(harness)
            assert (run.status, run.attempt) == ("failed", 3)
            assert run.error is not None and "did not answer within" in run.error["message"]
            late = {key: reply([("return_result", {"answer": 1})])}
            final = await rounds(c, arguments, input_responses=late, request_state=first.request_state)
    assert isinstance(final, types.CallToolResult) and final.structured_content is not None
    assert final.structured_content["status"] == "failed"


async def test_state_from_before_a_restart_is_refused(tmp_path: Path, harness: Harness) -> None:
    """A new process has a new key: the old round's state does not unseal, so its answer reaches no turn."""
    arguments = {"brief": "Answer me", "output": ANSWER}
    async with Client(
        build_server(harness), mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS
    ) as c:
        with anyio.fail_after(30):
            first = await rounds(c, arguments)
            (key,) = requests_of(first)
    assert child_run(harness).status == "canceled"  # stopping the server stopped the call, and its tree
    restarted = Harness(load_settings(data_dir=tmp_path / "data"))
    try:
        async with Client(
            build_server(restarted), mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS
        ) as c:
            with anyio.fail_after(30), pytest.raises(MCPError) as raised:
                stale = {key: reply([("return_result", {"answer": 1})])}
                await rounds(c, arguments, input_responses=stale, request_state=first.request_state)
        assert raised.value.error.message == "Invalid or expired requestState"
    finally:
        restarted.close()


async def test_cancelling_the_open_round_cancels_the_child(tmp_path: Path) -> None:
    scripted = scripted_harness(tmp_path, [{"when": "Wait forever", "turns": [{"delayMs": 60_000, "text": "late"}]}])
    try:
        async with Client(
            build_server(scripted), mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS
        ) as c:
            with anyio.move_on_after(1.0):
                await c.call_tool("delegate", {"brief": "Wait forever"})
            with anyio.fail_after(10):
                while child_run(scripted).status != "canceled":
                    await anyio.sleep(0.05)
    finally:
        scripted.close()


# -- over Streamable HTTP, with tokens: the state belongs to its caller ---------------------------------------------


@pytest.fixture
async def token_server(harness: Harness) -> AsyncIterator[str]:
    http = owner_and_other(harness, max_body_bytes=1 << 20)
    async with serving(http_app(build_server(harness), host="127.0.0.1", http=http)) as base:
        yield base


def authorized(url: str, token: str) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}))


async def test_over_http_the_clients_model_serves_the_call_and_only_its_caller_may_answer(
    token_server: str, harness: Harness
) -> None:
    seen: list[types.CreateMessageRequestParams] = []
    turns: Turns = {
        "Over HTTP": [[("return_result", {"answer": 5})]],
        "Answer me": [[("return_result", {"answer": 6})]],
    }
    owner = authorized(f"{token_server}/mcp", "owner-token")
    async with Client(owner, mode="2026-07-28", sampling_callback=model(turns, seen), sampling_capabilities=CAPS) as c:
        with anyio.fail_after(30):
            done = await call(c, "delegate", {"brief": "Over HTTP", "output": ANSWER})
            assert done["status"] == "succeeded" and done["output"] == {"answer": 5} and len(seen) == 1, done
            arguments = {"brief": "Answer me", "output": ANSWER}
            first = await rounds(c, arguments)
            (key,) = requests_of(first)
    responses: types.InputResponses = {key: reply([("return_result", {"answer": 0})])}
    assert isinstance(first, types.InputRequiredResult)
    session = harness.sessions.create(harness.account_id, harness.agent().id)
    with anyio.fail_after(30):
        # Another token's client, the same token on another session, altered arguments, an altered state.
        other = authorized(f"{token_server}/mcp", "other-token")
        elsewhere = authorized(f"{token_server}/mcp/sessions/{session.id}", "owner-token")
        sealed, gone = "Invalid or expired requestState", "no longer open here"
        for transport, args, state, why in [
            (other, arguments, first.request_state, sealed),  # the seal binds the token
            (elsewhere, arguments, first.request_state, gone),  # the call knows its caller's session
            (
                authorized(f"{token_server}/mcp", "owner-token"),
                {**arguments, "brief": "Else"},
                first.request_state,
                sealed,
            ),
            (authorized(f"{token_server}/mcp", "owner-token"), arguments, (first.request_state or "") + "x", sealed),
        ]:
            async with Client(transport, mode="2026-07-28", sampling_callback=never, sampling_capabilities=CAPS) as c:
                with pytest.raises(MCPError) as raised:
                    await rounds(c, args, input_responses=responses, request_state=state)
                assert raised.value.error.code == types.INVALID_PARAMS and why in raised.value.error.message
        # The caller itself still answers it, and gets the result.
        async with Client(
            authorized(f"{token_server}/mcp", "owner-token"),
            mode="2026-07-28",
            sampling_callback=model(turns, seen),
            sampling_capabilities=CAPS,
        ) as c:
            result = await c.call_tool(
                "delegate",
                arguments,
                request_state=first.request_state,
                input_responses={key: answer(turns, requests_of(first)[key])},
            )
    assert result.structured_content is not None and result.structured_content["output"] == {"answer": 6}


async def test_over_stdio_the_clients_model_serves_the_call(tmp_path: Path, harness: Harness) -> None:
    seen: list[types.CreateMessageRequestParams] = []
    turns: Turns = {"Over stdio": [[("return_result", {"answer": 8})]]}
    env = {**os.environ, "MCP_HARNESS_DATA_DIR": str(tmp_path / "data")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_harness", "serve"], env=env)
    with anyio.fail_after(60):
        async with Client(
            params, mode="2026-07-28", sampling_callback=model(turns, seen), sampling_capabilities=CAPS
        ) as c:
            done = await call(c, "delegate", {"brief": "Over stdio", "output": ANSWER})
    assert done["status"] == "succeeded" and done["output"] == {"answer": 8} and len(seen) == 1, done


# -- where no call can carry the requests, delegate refuses at once -------------------------------------------------


class Tasks(ClientExtension):
    """A client declaring the Tasks extension (a delegate then becomes a task)."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return []


async def test_delegate_refuses_what_cannot_reach_the_clients_model_in_2026(harness: Harness) -> None:
    brief = {"brief": "Answer me", "output": ANSWER}
    cases: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        ({}, brief, "did not declare|does not"),
        (
            {"sampling_callback": never, "sampling_capabilities": CAPS},
            {"brief": "Off you go", "await": False},
            "await: false",
        ),
        ({"sampling_callback": never, "sampling_capabilities": CAPS, "extensions": [Tasks()]}, brief, "became a task"),
    ]
    for options, arguments, why in cases:
        async with Client(build_server(harness), mode="2026-07-28", **options) as c:
            with anyio.fail_after(30):
                error = await refused(c, "delegate", arguments)
        message = error["message"]
        assert "2026-07-28" in message and "mcp-harness provider add" in message and "2025-11-25" in message, message
        assert any(w in message for w in why.split("|")), message
    assert not [s for s in harness.sessions.list(harness.account_id) if s.run_id], "no child was started"


async def test_a_grandchild_on_the_clients_model_under_a_call_that_cannot_sample_fails_saying_why(
    tmp_path: Path,
) -> None:
    """The direct child runs on a configured provider, its own child on the client's model: the whole tree works under
    a call that declared sampling, and under one that did not, the grandchild fails with the reason."""
    rules = [
        {
            "when": "Ask the client's model",
            "turns": [
                {"toolCalls": [{"name": "delegate", "input": {"brief": "Grandchild", "agentId": "sampler"}}]},
                {"text": "done"},
            ],
        },
        {"turns": [{"text": "default"}]},
    ]
    scripted = scripted_harness(tmp_path, rules)
    try:
        scripted.agents.create(
            scripted.account_id, normalize_definition({**scripted.default_definition().to_json(), "name": "sampler"})
        )
        on_sampling(scripted, "sampler")
        seen: list[types.CreateMessageRequestParams] = []
        turns: Turns = {"Grandchild": [["from the client's model"]]}
        for declares in (True, False):
            options: dict[str, Any] = {"sampling_callback": model(turns, seen), "sampling_capabilities": CAPS}
            async with Client(build_server(scripted), mode="2026-07-28", **(options if declares else {})) as c:
                with anyio.fail_after(30):
                    await call(c, "delegate", {"brief": "Ask the client's model"})
            grandchild = max(
                (
                    scripted.runs.get(s.run_id or "")
                    for s in scripted.sessions.list(scripted.account_id)
                    if s.title == "Grandchild"
                ),
                key=lambda r: r.created_at,
            )
            if declares:
                assert grandchild.status == "succeeded" and len(seen) == 1
            else:
                assert grandchild.status == "failed" and grandchild.error is not None
                assert "did not declare the `sampling.tools`" in grandchild.error["message"]
    finally:
        scripted.close()
