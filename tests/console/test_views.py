"""The console's view builders over real stores: listings, filters and search, the timeline, the run tree's
rolled-up usage and wait reasons, the pictures, and the one visibility rule (someone else's thing is not found)."""

from __future__ import annotations

import pytest

from mcp_harness.console import pages, runs, sessions, svg
from mcp_harness.console.live import ChangeFeed
from mcp_harness.errors import NotFound
from mcp_harness.scope import Scope
from mcp_harness.server.console import Directory
from tests.console.conftest import World

pytestmark = pytest.mark.anyio
LIMITS = {"agent": 8, "workflow": 8}


def test_sessions_list_every_session_with_status_agent_and_unanswered_calls(world: World) -> None:
    h = world.harness
    data = sessions.session_rows(h, Scope(h.account_id))
    rows = {r["title"]: r for r in data["sessions"]}
    assert set(rows) == {"assistant trip", "other trip"}
    assert rows["other trip"]["agent"] == "other" and rows["other trip"]["status"] == "live"
    assert rows["other trip"]["unanswered"] == 1 and rows["other trip"]["kind"] == "conversation"
    assert [r["title"] for r in sessions.session_rows(h, Scope(h.account_id), agent="other")["sessions"]] == [
        "other trip"
    ]
    assert sessions.session_rows(h, Scope(h.account_id), status="succeeded")["sessions"] == []
    found = sessions.session_rows(h, Scope(h.account_id), query="secret-assistant")["sessions"]
    assert [r["title"] for r in found] == ["assistant trip"] and "secret-assistant" in found[0]["snippet"]


def test_a_confined_scope_lists_and_finds_only_its_agent(world: World) -> None:
    h = world.harness
    other = Scope(h.account_id, world.agents["other"])
    assert [r["title"] for r in sessions.session_rows(h, other)["sessions"]] == ["other trip"]
    assert sessions.session_rows(h, other, agent="assistant")["sessions"] == []
    assert sessions.session_rows(h, other, query="secret-assistant")["sessions"] == []
    assert [a["name"] for a in sessions.session_rows(h, other)["agents"]] == ["other"]
    for build in (
        lambda: sessions.session_view(h, other, world.sessions["assistant"]),
        lambda: runs.run_tree(h, other, world.roots["assistant"], limits=LIMITS),
        lambda: pages.view(Directory(h), other, f"/agents/{world.agents['assistant']}", {}, limits=LIMITS),  # pyright: ignore[reportArgumentType]
    ):
        with pytest.raises(NotFound) as hidden:
            build()
        assert "assistant" not in hidden.value.message or "No agent" in hidden.value.message


def test_a_session_pairs_each_call_with_its_result_and_keeps_its_actor(world: World) -> None:
    h = world.harness
    data = sessions.session_view(h, Scope(h.account_id), world.sessions["assistant"])
    kinds = [(i["type"], i["actor"]) for i in data["timeline"]]
    assert kinds == [("message", "user"), ("tool", "agent"), ("tool", "agent")]
    done, still_open = data["timeline"][1], data["timeline"][2]
    assert done["state"] == "ok" and done["result"]["output"] == {"summary": "read a.md"}
    assert still_open["state"] == "open" and data["unanswered"] == 1
    assert [r["id"] for r in data["runs"]] == [world.roots["assistant"]]
    assert [s["status"] for s in data["plan"]["steps"]] == ["done", "running"]


def test_the_run_tree_rolls_usage_up_and_says_why_it_waits(world: World) -> None:
    h = world.harness
    data = runs.run_tree(h, Scope(h.account_id), world.roots["other"], limits=LIMITS)
    root = data["run"]
    assert root["status"] == "waiting" and data["live"]
    assert root["usage"]["total"] == 10 and root["usageRolledUp"]["total"] == 40
    children = {c["title"]: c for c in root["children"]}  # created in one millisecond: in no particular order
    assert children["other child 1"]["status"] == "succeeded" and children["other child 2"]["status"] == "failed"
    assert children["other child 2"]["error"] == {"code": "provider-error", "message": "boom"}
    assert root["waitReason"] == "Waiting on 0 sub-runs — 2 done"


def test_a_queued_run_says_how_many_it_is_queued_behind(world: World) -> None:
    h = world.harness
    agent = world.agents["assistant"]
    for i in range(2):
        busy = h.runs.enqueue(account_id=h.account_id, title=f"busy {i}", origin="user", agent_id=agent)
        with h.db.transaction() as conn:
            conn.execute("UPDATE runs SET status = 'running' WHERE id = ?", (busy.id,))
    first = h.runs.enqueue(account_id=h.account_id, title="first", origin="user", agent_id=agent)
    later = h.runs.enqueue(account_id=h.account_id, title="later", origin="user", agent_id=agent)
    with h.db.transaction() as conn:  # created in the same millisecond: make the claim order explicit
        conn.execute("UPDATE runs SET created_at = created_at - 10 WHERE id = ?", (first.id,))
    node = runs.run_tree(h, Scope(h.account_id), later.id, limits={"agent": 2})["run"]
    assert node["waitReason"] == "Queued behind 3 runs (2 live, 1 queued)"


def test_pictures_are_svg_drawn_from_the_data(world: World) -> None:
    h = world.harness
    root = runs.run_tree(h, Scope(h.account_id), world.roots["assistant"], limits=LIMITS)["run"]
    tree = svg.run_tree(root)
    assert tree.startswith("<svg") and tree.count('class="tree-node"') == 3 and "40 tok" in tree
    chart = svg.gantt(root, now=root["createdAt"] + 1000)
    assert chart.count('class="bar"') == 3
    bars = svg.usage_bars([(c["title"], c["usageRolledUp"]) for c in root["children"]])
    assert "30 tok" in bars and "0 tok" in bars
    progress = svg.plan_progress([{"status": "done"}, {"status": "running"}])
    assert 'aria-label="1 of 2 steps done"' in progress


def test_page_data_does_not_change_with_the_clock_but_does_with_the_store(world: World) -> None:
    h = world.harness
    directory = Directory(h)
    owner = Scope(h.account_id)
    path = f"/runs/{world.roots['assistant']}"
    first = pages.view(directory, owner, path, {}, limits=LIMITS)  # pyright: ignore[reportArgumentType]
    again = pages.view(directory, owner, path, {}, limits=LIMITS)  # pyright: ignore[reportArgumentType]
    assert first.version == again.version and first.render(1) != first.render(2_000_000)
    h.runs.add_usage(world.children["assistant"][1], {"input": 1})
    assert pages.view(directory, owner, path, {}, limits=LIMITS).version != first.version  # pyright: ignore[reportArgumentType]
    with pytest.raises(NotFound, match="No console page /nowhere"):
        pages.view(directory, owner, "/nowhere", {}, limits=LIMITS)  # pyright: ignore[reportArgumentType]


async def test_the_change_feed_moves_on_every_commit_and_not_otherwise(world: World) -> None:
    h = world.harness
    feed = ChangeFeed(h.db, foreign_check_s=0.05)
    seen = feed.generation
    assert await feed.changed(seen, timeout=0.2) == seen  # nothing committed: it times out unchanged
    import anyio

    async with anyio.create_task_group() as tg:

        async def commit() -> None:
            await anyio.to_thread.run_sync(lambda: h.sessions.set_plan(world.sessions["other"], None))

        tg.start_soon(commit)
        with anyio.fail_after(5):
            assert await feed.changed(seen, timeout=10) > seen
    feed.stop()


def test_a_waiting_run_says_what_it_waits_for(world: World) -> None:
    h = world.harness
    agent = world.agents["assistant"]
    expected = {
        "timer": ({"reason": "timer", "wakeAt": 4_000_000_000_000}, "Waiting on a timer"),
        "event": ({"reason": "event", "label": "go-ahead"}, "Waiting for an event (go-ahead)"),
        "budget": ({"reason": "budget-pause"}, "Paused: its budget is spent"),
    }
    for title, (wait, reason) in expected.items():
        run = h.runs.enqueue(account_id=h.account_id, title=title, origin="user", agent_id=agent)
        h.runs.park(run.id, wait)
        assert runs.run_tree(h, Scope(h.account_id), run.id, limits=LIMITS)["run"]["waitReason"] == reason


def test_a_session_lists_its_memory_writes_and_its_children(world: World) -> None:
    h = world.harness
    parent = world.sessions["other"]
    write = {"type": "tool_call", "id": "w1", "name": "write", "input": {"address": "~/memory/b.md", "content": "x"}}
    h.sessions.append(parent, write, "agent")
    h.sessions.append(parent, {"type": "tool_result", "toolCallId": "w1", "name": "write", "output": {}}, "agent")
    child = h.sessions.create(h.account_id, world.agents["other"], kind="child", title="kid", parent_session_id=parent)
    data = sessions.session_view(h, Scope(h.account_id), parent)
    assert data["memoryChanges"] == [{"address": "~/memory/b.md", "seq": 5, "state": "ok"}]
    assert [c["id"] for c in data["children"]] == [child.id]
    assert sessions.session_view(h, Scope(h.account_id), child.id)["parent"] == parent


def test_triggers_show_each_visible_agents_triggers(world: World) -> None:
    h = world.harness
    for name, agent_id in world.agents.items():
        h.triggers.save(
            account_id=h.account_id,
            agent_id=agent_id,
            name=f"{name}-daily",
            enabled=True,
            source={"type": "schedule", "every": "1d"},
            prompt="Check the news",
            continuation=None,
            next_due=lambda created, fired: None,
        )
    directory = Directory(h)
    owner = pages.view(directory, Scope(h.account_id), "/triggers", {}, limits=LIMITS)  # pyright: ignore[reportArgumentType]
    assert sorted(t["name"] for t in owner.data["triggers"]) == ["assistant-daily", "other-daily"]
    other = Scope(h.account_id, world.agents["other"])
    scoped = pages.view(directory, other, "/triggers", {}, limits=LIMITS)  # pyright: ignore[reportArgumentType]
    assert [t["name"] for t in scoped.data["triggers"]] == ["other-daily"]
    assert "other / other-daily" in scoped.render(0) and "No firings yet." in scoped.render(0)
