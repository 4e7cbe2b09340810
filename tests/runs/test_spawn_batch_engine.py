"""Siblings whose replies delegate together spawn as one batch (`AgentExecutor._delegate_groups`): their delegate
calls run as one lane call, and every parent gets exactly its own children, its calls logged in order and answered,
and its park; a batch that fails is run again parent by parent and leaves no child twice. Driven through the SDK
client, the real engine and its lane, on each backend (real SQLite, real PostgreSQL)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.runs.agent import AgentExecutor
from mcp_harness.runs.lane import StoreLane
from mcp_harness.server import build_server
from tests.runs.conftest import Gate
from tests.store.pgkit import store_backend_fixture  # noqa: F401  (the store_backend fixture)

MIDDLES = 3
LEAVES = 2


@pytest.fixture(autouse=True)
def both_backends(store_backend: str) -> str:
    return store_backend


def _fan(brief: str, n: int) -> list[dict[str, Any]]:
    calls = [{"name": "delegate", "input": {"brief": f"{brief} {i}"}} for i in range(n)]
    return [{"toolCalls": calls}, {"text": f"{brief}s came back"}]


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    return [
        {"when": "Leaf", "turns": [{"text": "leaf done"}]},
        {"when": "Middle", "turns": _fan("Leaf", LEAVES)},
        {"when": "Top", "turns": _fan("Middle", MIDDLES)},
    ]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The runs of each `_delegate_groups` call, by title, in order."""
    batches: list[list[str]] = []
    real = AgentExecutor._delegate_groups

    @functools.wraps(real)  # keeps its name, which the lane's spy below looks for
    def spy(self: AgentExecutor, groups: list[Any]) -> Any:
        batches.append([turn.run.title for turn, _, _ in groups])
        return real(self, groups)

    monkeypatch.setattr(AgentExecutor, "_delegate_groups", spy)
    return batches


async def _tree_held(h: Harness, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """`delegate Top` through the client, the lane held from the first middle's delegation until all of them have
    queued theirs, so they batch. The call's structured result."""
    gate = Gate()
    queued: list[str] = []
    holding: list[bool] = []
    real = StoreLane.call_batch
    out: dict[str, Any] = {}

    async with Client(build_server(h)) as client, anyio.create_task_group() as tg:

        async def call_batch(self: StoreLane, fn: Callable[..., Any], item: Any, *, first: bool = False) -> Any:
            if getattr(fn, "__name__", "") == "_delegate_groups" and item[0].run.title.startswith("Middle"):
                if not gate.entered.is_set():
                    if not holding:
                        holding.append(True)
                        tg.start_soon(h.engine.offload, gate)
                    await gate.held()
                queued.append(item[0].run.title)  # then into the lane's line, before anything else runs here
            return await real(self, fn, item, first=first)

        monkeypatch.setattr(StoreLane, "call_batch", call_batch)

        async def delegate() -> None:
            result = await client.call_tool("delegate", {"brief": "Top"})
            out.update(result.structured_content or {})

        tg.start_soon(delegate)
        with anyio.fail_after(20):
            while len(queued) < MIDDLES:
                await anyio.sleep(0.01)
            await wait_all_tasks_blocked()  # each middle's delegation waits behind the gate
        gate.opened.set()
    return out


def _runs(h: Harness) -> dict[str, Any]:
    with h.db.reading() as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM runs")]
    return {run.id: run for run in map(h.runs.get, ids)}


def _assert_tree(h: Harness) -> None:
    """Every middle has exactly its own leaves, one per call, and its session logs them in order and answered."""
    runs = _runs(h)
    middles = [r for r in runs.values() if r.title.startswith("Middle")]
    assert len(middles) == MIDDLES
    for middle in middles:
        assert middle.status == "succeeded"
        leaves = [r for r in runs.values() if r.parent_run_id == middle.id]
        assert len(leaves) == LEAVES
        assert {(r.status, r.root_run_id, r.depth) for r in leaves} == {("succeeded", middle.root_run_id, 2)}
        assert middle.session_id is not None
        events = h.sessions.events(middle.session_id)
        calls = [e.payload["id"] for e in events if e.type == "tool_call"]
        answered = [e.payload["toolCallId"] for e in events if e.type == "tool_result"]
        assert sorted(r.parent_tool_call_id or "" for r in leaves) == sorted(calls) == sorted(answered)
        assert len(calls) == LEAVES
        first_result = min(e.seq for e in events if e.type == "tool_result")
        assert max(e.seq for e in events if e.type == "tool_call") < first_result
        assert h.sessions.open_calls(middle.session_id) == []
        assert {h.sessions.parent_of(r.session_id or "") for r in leaves} == {middle.session_id}


@pytest.mark.anyio
async def test_siblings_delegating_together_spawn_their_children_in_one_batch(
    scripted: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = scripted
    batches = _spy(monkeypatch)
    out = await _tree_held(h, monkeypatch)
    assert out["status"] == "succeeded"
    middle_batches = [sorted(b) for b in batches if any(t.startswith("Middle") for t in b)]
    assert middle_batches == [[f"Middle {i}" for i in range(MIDDLES)]]
    _assert_tree(h)


@pytest.mark.anyio
async def test_a_spawn_batch_that_fails_is_run_again_parent_by_parent_and_spawns_each_child_once(
    scripted: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = scripted
    batches = _spy(monkeypatch)
    real = AgentExecutor._spawn_group
    failed: list[str] = []

    def spawn(self: AgentExecutor, turn: Any, calls: Any, writes: Any) -> list[str]:
        if turn.run.title == "Middle 1" and not failed:
            failed.append(turn.run.id)
            raise RuntimeError("the disk is on fire")  # once: in the batch, after Middle 0's children were gathered
        return real(self, turn, calls, writes)

    monkeypatch.setattr(AgentExecutor, "_spawn_group", spawn)
    out = await _tree_held(h, monkeypatch)
    assert out["status"] == "succeeded" and failed
    sized = [len(b) for b in batches if any(t.startswith("Middle") for t in b)]
    assert sized == [MIDDLES, 1, 1, 1]  # the batch, then each parent alone
    _assert_tree(h)  # nothing of the rolled-back batch stands beside the second run: each child once
    assert len(_runs(h)) == 1 + MIDDLES + MIDDLES * LEAVES
