"""`ctx.continue_as_new` (HARNESS §9.5): the predecessor succeeds with `{continued, continuedAsRunId}`, a successor
with a fresh id and journal takes its place under the same parent, and only the final successor answers the parent
— an MCP client's delegate call, or a server-run model turn parked on the script."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call
from tests.runs.waitkit import journal_kinds, parked, script_runs, start

pytestmark = pytest.mark.anyio

CHAIN = """
def main(ctx):
    state = ctx.input or {"n": 0, "seen": []}
    ctx.log("info", "round " + str(state["n"]))
    if state["n"] < 2:
        ctx.continue_as_new({"n": state["n"] + 1, "seen": state["seen"] + [ctx.run_id]})
    return {"rounds": state["n"], "seen": len(state["seen"])}
"""

RULES: list[dict[str, Any]] = [
    {
        "when": "Run the chain",
        "turns": [{"toolCalls": [{"name": "delegate", "input": {"script": CHAIN, "title": "chain"}}]}, {"text": "ok"}],
    },
    {"turns": [{"text": "default reply"}]},
]


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    return RULES


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:
        yield c


async def test_a_chain_answers_the_client_once_with_the_final_result(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(30):
        answer = await call(client, "delegate", {"script": CHAIN, "title": "chain", "input": None})
    runs = script_runs(scripted)
    assert len(runs) == 3
    assert answer["status"] == "succeeded" and answer["output"] == {"rounds": 2, "seen": 2}
    assert answer["runId"] == runs[-1].id
    first, second, last = runs
    assert first.output == {"continued": True, "continuedAsRunId": second.id}
    assert second.output == {"continued": True, "continuedAsRunId": last.id}
    assert [r.continued_from_run_id for r in runs] == [None, first.id, second.id]
    assert {r.title for r in runs} == {"chain"} and {r.queue for r in runs} == {first.queue}
    assert last.input["parentSessionId"] == first.input["parentSessionId"]
    assert last.parent_tool_call_id is not None and first.parent_tool_call_id is None  # the call is the successor's
    for run in runs:
        assert journal_kinds(scripted, run.id) == ["log"]  # each a fresh journal
    assert not scripted.awaited_children


async def test_a_model_parent_parked_on_a_chain_gets_one_result(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(30):
        result = await call(client, "delegate", {"brief": "Run the chain"})
    assert result["status"] == "succeeded"
    events = scripted.sessions.events(result["sessionId"])
    answers = [e.payload for e in events if e.type == "tool_result" and e.payload.get("name") == "delegate"]
    assert len(answers) == 1
    output = answers[0]["output"]
    runs = script_runs(scripted)
    assert output["status"] == "succeeded" and output["output"] == {"rounds": 2, "seen": 2}
    assert output["runId"] == runs[-1].id
    assert {r.parent_run_id for r in runs} == {result["runId"]}
    parent = scripted.runs.get(result["runId"])
    assert (parent.usage or {}).get("children", {}).get("runs") == 3


async def test_continue_as_new_after_a_wait_and_refused_inside_parallel(client: Client, scripted: Harness) -> None:
    script = """
def main(ctx):
    if ctx.input == "again":
        return "second"
    try:
        ctx.parallel([lambda: ctx.continue_as_new("x")])
    except RuntimeError as e:
        ctx.log("info", str(e))
    ctx.wait_for_event("go")
    ctx.continue_as_new("again")
"""
    from mcp_harness.runs.signals import deliver_signal

    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        assert deliver_signal(scripted.runs, account_id=scripted.account_id, run_id=run.id, signal="go") == run.id
        scripted.engine.wake()
        answer = await started.result()
        assert answer["output"] == "second"
        log = next(e for e in scripted.runs.journal(run.id) if e["kind"] == "log")
        assert log["message"].startswith("invalid-input: ctx.continue_as_new cannot be called inside ctx.parallel")


LONG_CHAIN = """
def main(ctx):
    if ctx.input == "again":
        ctx.wait_for_event("never")
    ctx.continue_as_new("again")
"""


async def test_canceling_a_continued_chain_cancels_its_live_successor(client: Client, scripted: Harness) -> None:
    """The client's call and its task id name the first run; once it has handed over, cancel and tasks/get reach
    the successor that does the work now."""
    from mcp_harness.verbs.delegate_tasks import client_task

    async with anyio.create_task_group() as tg:
        started = start(tg, client, LONG_CHAIN)
        successor = await parked(scripted, "event")
        first = script_runs(scripted)[0]
        assert first.id != successor.id and first.output == {"continued": True, "continuedAsRunId": successor.id}
        parent_session = first.input["parentSessionId"]
        assert client_task(scripted, parent_session, first.id).id == successor.id  # tasks/get follows the chain
        assert await scripted.engine.cancel(first.id) is True
        answer = await started.result()
        assert answer["status"] == "canceled" and answer["runId"] == successor.id
        assert scripted.runs.get(successor.id).status == "canceled"
