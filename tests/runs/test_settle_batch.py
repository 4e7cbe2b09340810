"""Siblings that end together settle as one batch (runs/settle_batch.py): their last replies run as one lane call,
the parent gets all their results in one append with one requeue and one roll-up of their usage; a batch that fails
is run again child by child; and a failed delivery leaves the children's terminal commits standing. Driven through
the SDK client, the real engine and its lane, on each backend (real SQLite, real PostgreSQL)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from mcp import Client

from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.models.scripted import ScriptedClient
from mcp_harness.models.wire import ModelRequest, ModelResponse
from mcp_harness.runs import Parked, Succeeded, settle_batch
from mcp_harness.runs.agent import AgentExecutor
from mcp_harness.server import build_server
from tests.runs.conftest import Gate
from tests.store.pgkit import store_backend_fixture  # noqa: F401  (the store_backend fixture)

WIDTH = 3


@pytest.fixture(autouse=True)
def both_backends(store_backend: str) -> str:
    """Every harness a test opens takes its store from `MCP_HARNESS_STORE_URL` (as the trigger suites do)."""
    return store_backend


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    calls = [{"name": "delegate", "input": {"brief": f"Leaf {i}"}} for i in range(WIDTH)]
    return [
        {"when": "Leaf", "turns": [{"delayMs": 300, "text": "leaf done", "usage": {"input": 2, "output": 1}}]},
        {"when": "Wide", "turns": [{"toolCalls": calls}, {"text": "all came back"}]},
    ]


class _Leaves:
    """Counts the leaves' model calls as they start and as they return (the script's own replies, unchanged)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = anyio.Event()
        self.ended = anyio.Event()
        self._starts = self._ends = 0
        real = ScriptedClient.complete

        async def complete(client: ScriptedClient, request: ModelRequest) -> ModelResponse:
            leaf = any(m.role == "user" and m.content.startswith("Leaf") for m in request.messages[:1])
            if leaf:
                self._starts += 1
                if self._starts == WIDTH:
                    self.started.set()
            response = await real(client, request)
            if leaf:
                self._ends += 1
                if self._ends == WIDTH:
                    self.ended.set()
            return response

        monkeypatch.setattr(ScriptedClient, "complete", complete)


def _spy_batches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The runs of each `_record_replies` call, in order."""
    batches: list[list[str]] = []
    real = AgentExecutor._record_replies

    def spy(self: AgentExecutor, replies: list[Any]) -> list[None]:
        batches.append([turn.run.id for turn, _ in replies])
        return real(self, replies)

    monkeypatch.setattr(AgentExecutor, "_record_replies", spy)
    return batches


async def _fan_out_held(h: Harness, monkeypatch: pytest.MonkeyPatch, *, give_up: bool = False) -> dict[str, Any]:
    """`delegate Wide` through the client, the lane held while the three leaves end, so their replies batch. Its
    `result`; with `give_up`, the call is given up once the leaves have settled (their parent may never hear back),
    and `root` is the parent's status then."""
    leaves = _Leaves(monkeypatch)
    gate = Gate()
    out: dict[str, Any] = {}
    async with Client(build_server(h)) as client, anyio.create_task_group() as tg:

        async def delegate() -> None:
            result = await client.call_tool("delegate", {"brief": "Wide"})
            out["result"] = result.structured_content or {}

        tg.start_soon(delegate)
        with anyio.fail_after(20):
            await leaves.started.wait()
            tg.start_soon(h.engine.offload, gate)
            await gate.held()
            await leaves.ended.wait()
            await wait_all_tasks_blocked()  # each leaf has queued its reply behind the gate
        gate.opened.set()
        if give_up:
            with anyio.fail_after(20):
                while not all(h.runs.get(r).status == "succeeded" for r in _leaf_ids(h, _root_of(h)[0])):
                    await anyio.sleep(0.02)
            await anyio.sleep(0.2)  # a requeued parent would have run its second turn by now
            out["root"] = h.runs.get(_root_of(h)[0]).status
            tg.cancel_scope.cancel()
    return out


def _root_of(h: Harness) -> tuple[str, str]:
    with h.db.reading() as conn:
        row = conn.execute("SELECT id, session_id FROM runs WHERE title LIKE 'Wide%'").fetchone()
    return row[0], row[1]


def _leaf_ids(h: Harness, root: str) -> set[str]:
    with h.db.reading() as conn:
        return {r[0] for r in conn.execute("SELECT id FROM runs WHERE parent_run_id = ?", (root,))}


@pytest.mark.anyio
async def test_siblings_ending_together_settle_in_one_batch_with_one_append_to_their_parent(
    scripted: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = scripted
    batches = _spy_batches(monkeypatch)
    out = await _fan_out_held(h, monkeypatch)
    assert out["result"]["status"] == "succeeded"
    root, session = _root_of(h)
    leaves = _leaf_ids(h, root)
    assert len(leaves) == WIDTH
    assert [set(b) for b in batches if set(b) & leaves] == [leaves]  # one batch held all three replies
    results = [e for e in h.sessions.events(session) if e.type == "tool_result"]
    assert [e.payload["name"] for e in results] == ["delegate"] * WIDTH
    assert [e.payload["output"]["output"]["text"] for e in results] == ["leaf done"] * WIDTH
    assert {e.payload["output"]["runId"] for e in results} == leaves
    first = results[0].seq
    assert [e.seq for e in results] == list(range(first, first + WIDTH))  # one append, in the batch's order
    assert {e.payload["toolCallId"] for e in results} == {f"call-0-{i}" for i in range(WIDTH)}
    assert h.sessions.open_calls(session) == []
    children = (h.runs.get(root).usage or {})["children"]  # one roll-up of the three: their tokens and their count
    assert (children["input"], children["output"], children["runs"]) == (2 * WIDTH, WIDTH, WIDTH)
    for leaf in leaves:
        assert h.runs.get(leaf).status == "succeeded"


@pytest.mark.anyio
async def test_a_batch_that_fails_is_run_again_reply_by_reply_and_only_the_bad_one_fails(
    scripted: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = scripted
    batches = _spy_batches(monkeypatch)
    real = AgentExecutor._owed
    lost: list[str] = []

    def owed(self: AgentExecutor, turn: Any, plan: Any) -> list[dict[str, Any]]:
        if turn.run.title.startswith("Leaf 1"):
            lost.append(turn.run.id)
            raise RuntimeError("the disk is on fire")
        return real(self, turn, plan)

    monkeypatch.setattr(AgentExecutor, "_owed", owed)
    out = await _fan_out_held(h, monkeypatch)
    root, session = _root_of(h)
    leaves = _leaf_ids(h, root)
    bad = lost[0]
    sized = [len(b) for b in batches if set(b) & leaves]
    assert sized == [WIDTH, 1, 1, 1]  # the batch, then each reply alone
    # The two good leaves' replies and settles stand, once each; the bad one's rolled back with its batch.
    results = [e for e in h.sessions.events(session) if e.type == "tool_result"]
    good = leaves - {bad}
    assert {h.runs.get(r).status for r in good} == {"succeeded"}
    assert len(results) >= len(good)
    delivered = {e.payload["output"]["runId"] for e in results if e.payload["output"]["status"] == "succeeded"}
    assert delivered == good
    assert h.runs.get(bad).status != "succeeded"
    assert out["result"]["status"] in {"succeeded", "failed"}


@pytest.mark.anyio
async def test_held_deliveries_are_made_only_when_the_batch_stands(
    scripted: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    h = scripted
    failing = {"on": True}
    real = settle_batch.deliver_siblings_in

    def deliver(*args: Any) -> None:
        if failing["on"]:
            failing["on"] = False
            raise RuntimeError("the parent's session is unreachable")
        real(*args)

    monkeypatch.setattr(settle_batch, "deliver_siblings_in", deliver)
    with caplog.at_level(logging.ERROR, logger="mcp_harness.runs.settle_batch"):
        root_then = (await _fan_out_held(h, monkeypatch, give_up=True))["root"]
    root, session = _root_of(h)
    leaves = _leaf_ids(h, root)
    # The delivery failed and was logged; the leaves' terminal commits stood without it.
    assert "Delivering results for run" in caplog.text
    assert {h.runs.get(r).status for r in leaves} == {"succeeded"}
    assert [e for e in h.sessions.events(session) if e.type == "tool_result"] == []
    assert root_then == "waiting"  # never requeued: nothing was delivered (the boot reconciliation would redo it)


def _parent_with_children(h: Harness, n: int) -> tuple[str, str, list[str]]:
    """A parent run waiting on `n` delegate calls of its session, each with a finished child; the call ids."""
    agent = h.agent().id
    parent_session = h.sessions.create(h.account_id, agent).id
    parent = h.runs.enqueue(account_id=h.account_id, title="parent", origin="agent", session_id=parent_session)
    calls = [f"call-{i}" for i in range(n)]
    h.sessions.append_many(
        parent_session,
        [({"type": "tool_call", "id": c, "name": "delegate", "input": {"brief": c}}, "agent") for c in calls],
    )
    h.runs.claim_next("me", kinds=["agent"])
    h.runs.settle(parent.id, Parked({"reason": "children", "toolCallIds": calls}))
    for call in calls:
        session = h.sessions.create(h.account_id, agent, kind="child", parent_session_id=parent_session).id
        child = h.runs.enqueue(
            account_id=h.account_id,
            title=call,
            origin="agent",
            session_id=session,
            parent_run_id=parent.id,
            parent_tool_call_id=call,
        )
        h.runs.settle(child.id, Succeeded({"text": f"{call} done"}))
    return parent.id, parent_session, calls


def _children(h: Harness, parent: str) -> list[Any]:
    with h.db.reading() as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM runs WHERE parent_run_id = ? ORDER BY title", (parent,))]
    return [h.runs.get(i) for i in ids]


def test_a_child_whose_call_is_answered_already_gets_the_late_notice_and_its_siblings_their_delivery(
    harness: Harness,
) -> None:
    h = harness
    parent, session, calls = _parent_with_children(h, 3)
    answered = {"type": "tool_result", "toolCallId": calls[1], "name": "delegate", "output": {"status": "canceled"}}
    h.sessions.append(session, answered, "system")
    children = _children(h, parent)
    with h.db.transaction():
        settle_batch.deliver_all(h, children)
    results = [e.payload for e in h.sessions.events(session) if e.type == "tool_result"]
    assert [(r["toolCallId"], r["output"]["status"]) for r in results] == [
        (calls[1], "canceled"),
        (calls[0], "succeeded"),
        (calls[2], "succeeded"),
    ]
    late = children[1]
    assert late.session_id is not None
    notices = [e.payload["content"] for e in h.sessions.events(late.session_id) if e.type == "message"]
    assert notices and "already stopped waiting" in notices[-1]
    assert h.runs.get(parent).status == "queued"  # its last call answered: requeued once


def test_the_parent_stays_waiting_while_a_call_it_waits_on_is_open(harness: Harness) -> None:
    h = harness
    parent, session, calls = _parent_with_children(h, 3)
    children = _children(h, parent)[:2]  # the third child's result is still to come
    with h.db.transaction():
        settle_batch.deliver_all(h, children)
    assert [e.payload["toolCallId"] for e in h.sessions.events(session) if e.type == "tool_result"] == calls[:2]
    assert h.runs.get(parent).status == "waiting"
    with h.db.transaction():
        settle_batch.deliver_all(h, _children(h, parent)[2:])
    assert h.runs.get(parent).status == "queued"


@pytest.mark.anyio
async def test_a_run_whose_set_up_is_refused_fails_alone_among_the_starts_of_its_siblings(
    scripted: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = scripted
    real = AgentExecutor._start

    def start(self: AgentExecutor, run: Any, reads: Any) -> Any:
        if run.title.startswith("Leaf 1"):
            raise BadRequest("The system prompt is over 64 KiB.")
        return real(self, run, reads)

    monkeypatch.setattr(AgentExecutor, "_start", start)
    async with Client(build_server(h)) as client:
        result = await client.call_tool("delegate", {"brief": "Wide"})
    assert (result.structured_content or {})["status"] == "succeeded"
    root, session = _root_of(h)
    outputs = {
        e.payload["output"]["runId"]: e.payload["output"] for e in h.sessions.events(session) if e.type == "tool_result"
    }
    statuses = {h.runs.get(r).title.split(":")[0][:6]: outputs[r]["status"] for r in _leaf_ids(h, root)}
    assert statuses == {"Leaf 0": "succeeded", "Leaf 1": "failed", "Leaf 2": "succeeded"}
    failed = next(o for o in outputs.values() if o["status"] == "failed")
    assert failed["error"] == {"code": "config-error", "message": "The system prompt is over 64 KiB."}
