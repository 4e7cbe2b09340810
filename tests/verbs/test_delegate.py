"""Delegation end to end through the MCP client, with the scripted provider (HARNESS §6–§8)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, refused

pytestmark = pytest.mark.anyio

ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


def result_call(answer: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": "return_result", "input": {"answer": answer}}]}


def delegate_call(brief: str, **extra: Any) -> dict[str, Any]:
    return {"name": "delegate", "input": {"brief": brief, **extra}}


RULES: list[dict[str, Any]] = [
    {"when": "Compute the answer", "turns": [result_call(42)]},
    {"when": "Self-correct", "turns": [result_call("forty-two"), result_call(42)]},
    {"when": "Never valid", "turns": [result_call("a"), result_call("b"), result_call("c")]},
    {"when": "Slow leaf", "turns": [{"delayMs": 600, "text": "leaf done"}]},
    {"when": "Long turn", "turns": [{"delayMs": 6_000, "text": "long turn done"}]},
    {
        "when": "Coordinate three",
        "turns": [
            {"toolCalls": [delegate_call(f"Slow leaf {i}") for i in range(3)]},
            {"text": "all three came back"},
        ],
    },
    {
        "when": "Spawn eleven",
        "turns": [{"toolCalls": [delegate_call(f"Slow leaf {i}") for i in range(11)]}, {"text": "done"}],
    },
    {"when": "Go deeper", "turns": [{"toolCalls": [delegate_call("Go deeper")]}, {"text": "bottom"}]},
    {
        "when": "Interleave calls",
        "turns": [
            {
                "toolCalls": [
                    delegate_call("Quick child one"),
                    delegate_call("x", prompt="persona", agentId="other"),
                    delegate_call("Quick child two"),
                    {"name": "no_such_tool", "input": {}},
                    delegate_call("Quick child three"),
                ]
            },
            {"text": "all back"},
        ],
    },
    {
        "when": "Try executing",
        "turns": [
            {
                "toolCalls": [
                    {"name": "call", "input": {"tool": "execute", "input": {"runtime": "shell", "code": "echo x"}}}
                ]
            },
            {"text": "tried"},
        ],
    },
    {
        "when": "Plan and delegate",
        "turns": [
            {
                "toolCalls": [
                    {"name": "plan", "input": {"steps": [{"id": "a", "label": "Ask a child", "status": "running"}]}}
                ]
            },
            {"toolCalls": [delegate_call("Slow leaf for the plan")]},
            {"text": "the child finished"},
        ],
    },
    {
        "when": "Leave the plan open",
        "turns": [
            {
                "toolCalls": [
                    {"name": "plan", "input": {"steps": [{"id": "x", "label": "Unfinished", "status": "pending"}]}}
                ]
            },
            {"text": "stopping here"},
        ],
    },
    {"when": "Wait forever", "turns": [{"delayMs": 60_000, "text": "too late"}]},
    {"turns": [{"text": "default reply"}]},
]


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    """The script of conftest.py's `scripted` harness."""
    return RULES


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:
        yield c


async def test_typed_result_is_delivered(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(20):
        result = await call(client, "delegate", {"brief": "Compute the answer", "output": ANSWER})
    assert result["status"] == "succeeded" and result["output"] == {"answer": 42}
    child = scripted.sessions.get(result["sessionId"])
    assert child.kind == "child" and child.run_id == result["runId"]
    first = scripted.sessions.events(child.id)[0]
    assert first.payload["content"] == "Compute the answer", "the brief is the child's first message verbatim"


async def test_schema_errors_are_self_corrected_then_retries_run_out(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(20):
        fixed = await call(client, "delegate", {"brief": "Self-correct", "output": ANSWER})
        assert fixed["status"] == "succeeded" and fixed["output"] == {"answer": 42}
        errors = [
            e.payload["error"]
            for e in scripted.sessions.events(fixed["sessionId"])
            if e.type == "tool_result" and "error" in e.payload
        ]
        assert errors and errors[0].startswith("Result does not match the required schema: $.answer: expected integer")
        failed = await call(client, "delegate", {"brief": "Never valid", "output": ANSWER})
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "output-schema"
    # The failure says why the last try was rejected, so the caller can fix the brief or the schema.
    assert "the last one was rejected for: $.answer: expected integer" in failed["error"]["message"]


async def test_children_of_one_reply_run_at_the_same_time(client: Client, scripted: Harness) -> None:
    started = time.monotonic()
    with anyio.fail_after(30):
        result = await call(client, "delegate", {"brief": "Coordinate three"})
    wall = time.monotonic() - started
    assert result["status"] == "succeeded" and result["output"] == {"text": "all three came back"}
    assert wall < 1.5, f"three 0.6 s children took {wall:.2f}s: they did not run in parallel"
    coordinator = scripted.runs.get(result["runId"])
    children = scripted.runs.children(coordinator.id)
    assert len(children) == 3 and all(c.status == "succeeded" for c in children)
    results = [e for e in scripted.sessions.events(result["sessionId"]) if e.type == "tool_result"]
    assert len(results) == 3, "each child's result is delivered exactly once"


async def test_a_reply_mixing_delegates_with_other_calls_answers_each_once_in_order(
    client: Client, scripted: Harness
) -> None:
    """Consecutive delegate calls are spawned together; a refused one is answered alone; a call between two
    groups runs between them; the run parks once on every child of the reply and resumes when all are back."""
    with anyio.fail_after(20):
        result = await call(client, "delegate", {"brief": "Interleave calls"})
    assert result["status"] == "succeeded" and result["output"] == {"text": "all back"}
    events = scripted.sessions.events(result["sessionId"])
    calls = [e.payload["id"] for e in events if e.type == "tool_call"]
    assert calls == [f"call-0-{i}" for i in range(5)], "the calls are logged in the reply's order"
    answers = {e.payload["toolCallId"]: e.payload for e in events if e.type == "tool_result"}
    assert sorted(answers) == sorted(calls), "every call has exactly one result"
    assert answers["call-0-1"]["error"] == "Provide either prompt or agentId, not both."
    assert answers["call-0-3"]["error"] == "Unknown tool no_such_tool."
    assert [answers[c]["output"]["status"] for c in ("call-0-0", "call-0-2", "call-0-4")] == ["succeeded"] * 3
    assert len(scripted.runs.children(result["runId"])) == 3
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_parallel_delegates_from_one_client_run_concurrently(client: Client) -> None:
    outcomes: list[dict[str, Any]] = []

    async def one(i: int) -> None:
        outcomes.append(await call(client, "delegate", {"brief": f"Slow leaf {i}"}))

    started = time.monotonic()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(one, i)
    assert time.monotonic() - started < 1.5
    assert [o["status"] for o in outcomes] == ["succeeded"] * 3


async def test_limits_are_refused_with_the_reference_messages(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(60):
        deep = await call(client, "delegate", {"brief": "Go deeper"})
        assert deep["status"] == "succeeded"
        errors = []
        for session in scripted.sessions.list(scripted.account_id, limit=100):
            errors += [
                e.payload.get("error", "") for e in scripted.sessions.events(session.id) if e.type == "tool_result"
            ]
        assert any(e.startswith("Sub-session depth limit reached (3)") for e in errors)
        many = await call(client, "delegate", {"brief": "Spawn eleven"})
        assert many["status"] == "succeeded"
        results = [e.payload for e in scripted.sessions.events(many["sessionId"]) if e.type == "tool_result"]
        refusals = [r["error"] for r in results if "error" in r]
        assert len(refusals) == 1 and refusals[0].startswith("This run already spawned 10 sub-sessions")
    error = await refused(client, "delegate", {"brief": "x", "prompt": "persona", "agentId": "other"})
    assert error["message"] == "Provide either prompt or agentId, not both."
    error = await refused(client, "delegate", {"title": "no brief"})
    assert "delegate requires a `brief`" in error["message"]
    error = await refused(client, "delegate", {"brief": "x", "output": {"type": "string"}})
    assert error["message"].startswith("output schema is not supported")
    error = await refused(client, "delegate", {"brief": "x", "await": False, "output": ANSWER})
    assert "delegate {await: false} does not support `output`" in error["message"]


async def test_narrowing_never_widens_authority(scripted: Harness) -> None:
    agent = scripted.agent()
    scripted.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "tools": ["publish"]}))
    async with Client(build_server(scripted), mode="legacy") as c:
        with anyio.fail_after(20):
            result = await call(c, "delegate", {"brief": "Try executing", "tools": ["execute"]})
    assert result["status"] == "succeeded"
    outputs = [e.payload["output"] for e in scripted.sessions.events(result["sessionId"]) if e.type == "tool_result"]
    assert outputs[0]["summary"] == "No callable tool named execute. Here is what you can call."


async def test_detached_children_run_in_the_background(client: Client, scripted: Harness) -> None:
    detached = await call(client, "delegate", {"brief": "Just say hello", "await": False})
    assert detached["status"] == "detached" and scripted.runs.get(detached["runId"]).session_id == detached["sessionId"]
    with anyio.fail_after(20):
        while True:
            events = scripted.sessions.events(detached["sessionId"])
            if any(e.payload.get("role") == "assistant" for e in events):
                break
            await anyio.sleep(0.05)
    assert [e.payload.get("content") for e in events if e.payload.get("role") == "assistant"] == ["default reply"]
    # The caller's thread lists the detached child with its run, so it can be found and watched.
    parent = scripted.sessions.get(detached["sessionId"]).parent_session_id
    listed = await call(client, "read", {"address": f"thread:{parent}", "format": "json"})
    child = next(c for c in listed["children"] if c["thread"] == f"thread:{detached['sessionId']}")
    assert child["runId"] == detached["runId"] and child["runStatus"] in ("running", "succeeded")


async def test_plan_steps_settle_when_their_children_succeed(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(20):
        result = await call(client, "delegate", {"brief": "Plan and delegate"})
    assert result["status"] == "succeeded"
    plan = scripted.sessions.get_plan(result["sessionId"])
    assert plan is not None
    assert plan["steps"][0]["status"] == "done" and plan["steps"][0]["resolvedBy"] == "runtime"


async def test_obligations_continue_three_times_then_settle_honestly(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(20):
        result = await call(client, "delegate", {"brief": "Leave the plan open"})
    assert result["status"] == "succeeded"
    assert result["output"]["unmetObligations"] == [{"kind": "plan", "steps": ["Unfinished"]}]
    system = [e.payload["content"] for e in scripted.sessions.events(result["sessionId"]) if e.actor == "system"]
    assert len([m for m in system if m.startswith("This turn is ending with work you committed to")]) == 3
    assert system[-1].startswith("This run ended with work still open:")


async def test_an_outside_client_on_the_child_endpoint_completes_the_delegate(scripted: Harness) -> None:
    """The child's model would take a minute; an outside client on /mcp/sessions/<child> (here: the child session
    bound in process) sees return_result with the real schema, corrects itself, and delivers."""
    async with Client(build_server(scripted), mode="legacy") as parent:
        outcome: list[dict[str, Any]] = []

        async def wait_for_parent() -> None:
            outcome.append(await call(parent, "delegate", {"brief": "Wait forever", "output": ANSWER}))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_parent)
                while not (children := [s for s in scripted.sessions.list(scripted.account_id) if s.kind == "child"]):
                    await anyio.sleep(0.05)
                async with Client(build_server(scripted, session_id=children[0].id), mode="legacy") as worker:
                    tools = {t.name: t for t in (await worker.list_tools()).tools}
                    assert tools["return_result"].input_schema == ANSWER
                    bad = await worker.call_tool("return_result", {"answer": "no"})
                    assert bad.is_error
                    good = await call(worker, "return_result", {"answer": 7})
                    assert good["accepted"] is True
    assert outcome[0]["status"] == "succeeded" and outcome[0]["output"] == {"answer": 7}


async def test_cancelling_the_client_call_cancels_the_child(client: Client, scripted: Harness) -> None:
    with anyio.move_on_after(1.0):
        await client.call_tool("delegate", {"brief": "Wait forever"})
    with anyio.fail_after(10):
        while True:
            runs = [scripted.runs.get(s.run_id) for s in scripted.sessions.list(scripted.account_id) if s.run_id]
            if runs and all(r.status == "canceled" for r in runs):
                break
            await anyio.sleep(0.05)


async def test_run_and_thread_reads_show_children(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(20):
        result = await call(client, "delegate", {"brief": "Coordinate three"})
    run = await call(client, "read", {"address": f"run:{result['runId']}", "format": "json"})
    assert run["status"] == "succeeded" and len(run["children"]) == 3
    assert run["usage"]["children"]["runs"] == 3
    thread = await call(client, "read", {"address": f"thread:{result['sessionId']}", "format": "json"})
    assert len(thread["children"]) == 3 and all(c["runStatus"] == "succeeded" for c in thread["children"])


async def test_a_waiting_delegate_call_reports_progress(client: Client) -> None:
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message:
            notes.append(message)

    with anyio.fail_after(20):
        result = await client.call_tool("delegate", {"brief": "Slow leaf with progress"}, progress_callback=on_progress)
    assert not result.is_error
    assert notes[0].startswith('Started child "Slow leaf with progress"')
    assert any(n.startswith('Child "Slow leaf with progress" is running') for n in notes[1:])


async def test_a_long_model_turn_sends_heartbeats_saying_what_the_child_does(client: Client) -> None:
    """A single 6 s model reply changes nothing the client can see; progress still arrives every few seconds."""
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message:
            notes.append(message)

    with anyio.fail_after(30):
        result = await client.call_tool("delegate", {"brief": "Long turn"}, progress_callback=on_progress)
    assert not result.is_error
    waiting = [n for n in notes if n.startswith('Child "Long turn" is running, waiting on model reply 1')]
    assert len(waiting) >= 2, f"the same state is re-sent as a heartbeat: {notes}"
    assert waiting[-1] != waiting[0], "each heartbeat carries the elapsed time"
