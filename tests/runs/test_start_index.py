"""`StartIndex`: runs started back to back on one lane share their first request's `<space>` index; any other lane
call between two starts, another agent, or a start off the lane builds it afresh. And end to end: a child started
in a fan-out still sees in its index what its parent wrote before delegating."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.models.scripted import ScriptedClient
from mcp_harness.models.wire import ModelRequest, ModelResponse
from mcp_harness.runs import prompt
from mcp_harness.runs.lane import StoreLane, position
from mcp_harness.runs.prompt import StartIndex
from mcp_harness.server import build_server
from mcp_harness.store.agents import AgentRecord
from mcp_harness.store.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "h.db")
    yield database
    database.close()


@dataclasses.dataclass
class _Store:
    db: Database


def _agent(agent_id: str) -> AgentRecord:
    raw: dict[str, Any] = {"name": "a", "systemPrompt": "Help.", "modelProvider": "scripted", "model": "m"}
    return AgentRecord(
        id=agent_id,
        account_id="local",
        definition=normalize_definition(raw),
        state_dir=Path("."),
        status="active",
        created_at=0,
        updated_at=0,
    )


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The agents whose index was built, in order (the build itself is the real one's stand-in)."""
    log: list[str] = []

    def space_index(host: Any, agent: AgentRecord) -> str:
        log.append(agent.id)
        return f"<space>{agent.id} #{len(log)}</space>"

    monkeypatch.setattr(prompt, "space_index", space_index)
    return log


@pytest.mark.anyio
async def test_back_to_back_starts_share_the_index_and_anything_between_them_breaks_the_chain(
    db: Database, built: list[str]
) -> None:
    lane, memo, host = StoreLane(_Store(db)), StartIndex(), object()
    a, b = _agent("a"), _agent("b")
    a_again = dataclasses.replace(a, definition=dataclasses.replace(a.definition))

    async def start(agent: AgentRecord) -> str:
        return await lane.call(memo.of, host, agent)  # pyright: ignore[reportArgumentType]  (a stand-in host)

    first = await start(a)
    assert await start(a_again) == first  # an equal record (a child's copy of the agent) shares it
    assert await start(a) == first
    assert built == ["a"]
    await lane.call(lambda: None)  # any other call on the lane (a claim, a reply's write) ends the chain
    assert await start(a) != first
    assert await start(b) != await start(a)  # another agent, then back: each its own
    assert built == ["a", "a", "b", "a"]


@pytest.mark.anyio
async def test_starts_in_one_batch_share_the_index_with_the_call_before_and_each_other(
    db: Database, built: list[str]
) -> None:
    lane, memo, host, a = StoreLane(_Store(db)), StartIndex(), object(), _agent("a")

    def starts(agents: list[AgentRecord]) -> list[str]:  # as `AgentExecutor._starts`: one lane call, several starts
        return [memo.of(host, agent) for agent in agents]  # pyright: ignore[reportArgumentType]

    first = await lane.call(memo.of, host, a)  # pyright: ignore[reportArgumentType]
    assert await lane.call_batch(starts, a) == first  # the call just before, then within the batch
    assert await lane.call(starts, [a, a]) == [first, first]
    assert built == ["a"]


@pytest.mark.anyio
async def test_off_the_lane_and_on_another_lane_the_index_is_built_each_time(db: Database, built: list[str]) -> None:
    memo, host, a = StartIndex(), object(), _agent("a")
    assert position() is None
    memo.of(host, a)  # pyright: ignore[reportArgumentType]
    memo.of(host, a)  # pyright: ignore[reportArgumentType]
    one, two = StoreLane(_Store(db)), StoreLane(_Store(db))
    await one.call(memo.of, host, a)
    await two.call(memo.of, host, a)  # its serial may follow, but it is not the same lane
    assert built == ["a", "a", "a", "a"]
    at_one = [await one.call(position) for _ in range(2)]
    assert [(lane is one, serial) for lane, serial in (p for p in at_one if p is not None)] == [(True, 2), (True, 3)]


SCRIPT: dict[str, Any] = {
    "rules": [
        {"when": "Child", "turns": [{"text": "child done"}]},
        {
            "when": "Parent",
            "turns": [
                {"toolCalls": [{"name": "write", "input": {"address": "~/memory/noted-first", "content": "x"}}]},
                {"toolCalls": [{"name": "delegate", "input": {"brief": f"Child {i}"}} for i in range(4)]},
                {"text": "all back"},
            ],
        },
    ]
}


@pytest.mark.anyio
async def test_children_started_together_see_what_their_parent_wrote_before_delegating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    systems: dict[str, str] = {}
    complete = ScriptedClient.complete

    async def spy(self: ScriptedClient, request: ModelRequest) -> ModelResponse:
        brief = next((m.content for m in request.messages if m.role == "user"), "")
        systems.setdefault(str(brief), request.system or "")
        return await complete(self, request)

    monkeypatch.setattr(ScriptedClient, "complete", spy)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    providers = {"scripted": {"type": "scripted", "file": str(script)}}
    harness = Harness(load_settings(data_dir=tmp_path / "data", providers=providers))
    try:
        async with Client(build_server(harness), mode="legacy") as client:
            result = await client.call_tool("delegate", {"brief": "Parent"})
        assert (result.structured_content or {}).get("status") == "succeeded"
        children = {brief: system for brief, system in systems.items() if brief.startswith("Child")}
        assert sorted(children) == [f"Child {i}" for i in range(4)]
        assert "noted-first" not in systems["Parent"]  # its first request came before the write
        assert all("noted-first" in system for system in children.values())
    finally:
        harness.close()
