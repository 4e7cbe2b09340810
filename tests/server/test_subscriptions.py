"""Live resources through the SDK Client: `resources/subscribe` (handshake era) and `subscriptions/listen` (2026-07-28)
announce a plan update and a run's status change; someone else's run is refused like a read."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call

pytestmark = pytest.mark.anyio

STEPS = [{"id": "s1", "label": "one", "status": "pending"}]


@pytest.fixture
def idle_engine(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """The harness with its engine not started, so a queued run stays queued until the test changes it."""

    @asynccontextmanager
    async def not_running(**_: object) -> AsyncIterator[None]:
        yield

    monkeypatch.setattr(harness, "engine_running", not_running)
    return harness


def _queued_run(harness: Harness, agent_name: str | None = None) -> str:
    agent = harness.agent(agent_name)
    return harness.runs.enqueue(account_id=harness.account_id, title="t", origin="user", agent_id=agent.id).id


class Updates:
    """`notifications/resources/updated` URIs a handshake-era client hears."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self._event.set()

    async def wait_for(self, uri: str) -> None:
        with anyio.fail_after(10):
            while uri not in self.uris:
                self._event = anyio.Event()
                await self._event.wait()


async def _subscribe(c: Client, uri: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated only as of 2026-07-28, which these tests do not speak
        await c.subscribe_resource(uri)


async def test_handshake_era_subscribe_announces_plan_and_run_changes(idle_engine: Harness) -> None:
    harness = idle_engine
    updates = Updates()
    async with Client(build_server(harness), mode="legacy", message_handler=updates) as c:
        caps = c.server_capabilities
        assert caps.resources == types.ResourcesCapability(subscribe=True, list_changed=False)
        assert caps.completions is not None
        await call(c, "plan", {"steps": STEPS})  # the session exists and has a plan
        run_id = _queued_run(harness)
        await _subscribe(c, "harness://plan")
        await _subscribe(c, f"run:{run_id}")
        await call(c, "plan", {"steps": [{**STEPS[0], "status": "done"}]})
        await updates.wait_for("harness://plan")
        assert f"run:{run_id}" not in updates.uris  # only what changed is announced
        harness.runs.cancel_tree(run_id)  # queued → canceled
        await updates.wait_for(f"run:{run_id}")
        text = (await c.read_resource(f"run:{run_id}")).contents[0]
        assert isinstance(text, types.TextResourceContents) and "canceled" in text.text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await c.unsubscribe_resource("harness://plan")
        seen = len(updates.uris)
        await call(c, "plan", {"steps": [{**STEPS[0], "status": "failed"}]})
        harness.runs.cancel_tree(_queued_run(harness))  # another commit: the watcher wakes, nothing is due
        assert updates.uris[seen:].count("harness://plan") == 0


TRIGGER = {"source": {"type": "schedule", "schedule": {"kind": "interval", "every": 1, "unit": "hours"}}}


async def test_handshake_era_thread_memory_and_trigger_subscriptions(harness: Harness) -> None:
    updates = Updates()
    async with Client(build_server(harness), mode="legacy", message_handler=updates) as c:
        await call(c, "write", {"address": "~/memory/notes.md", "content": "one"})
        trigger = {**TRIGGER, "prompt": "Write the daily note."}
        await call(c, "write", {"address": "~/triggers/daily", "content": json.dumps(trigger)})
        session = harness.sessions.list(harness.account_id)[0]
        await _subscribe(c, f"thread:{session.id}")
        await _subscribe(c, "harness://memory/notes.md")
        await _subscribe(c, "harness://triggers/daily")
        await call(c, "write", {"address": "~/memory/notes.md", "content": "two, longer"})
        await updates.wait_for("harness://memory/notes.md")
        await updates.wait_for(f"thread:{session.id}")
        assert "harness://triggers/daily" not in updates.uris
        trigger = {**TRIGGER, "prompt": "Write the weekly note."}
        await call(c, "write", {"address": "~/triggers/daily", "content": json.dumps(trigger)})
        await updates.wait_for("harness://triggers/daily")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_what_cannot_be_read_cannot_be_subscribed(harness: Harness, mode: str) -> None:
    async with Client(build_server(harness), mode=mode) as c:
        with pytest.raises(MCPError) as info:
            if mode == "legacy":
                await _subscribe(c, "run:nope")
            else:
                async with c.listen(resource_subscriptions=["run:nope"]):
                    pass
        assert info.value.message == "No run nope." and info.value.data == {"uri": "run:nope"}
        with pytest.raises(MCPError) as info:
            if mode == "legacy":
                await _subscribe(c, "harness://self")
            else:
                async with c.listen(resource_subscriptions=["harness://self"]):
                    pass
        assert info.value.code == -32602 and "live resources are harness://plan, run:<id>" in info.value.message


def test_capabilities_declare_what_is_served(harness: Harness) -> None:
    """2026-07-28 delivers change notifications only on listen streams, and ours carry resource updates alone."""
    caps = build_server(harness).get_capabilities(protocol_version="2026-07-28")
    assert caps.resources == types.ResourcesCapability(subscribe=True, list_changed=False)
    assert caps.tools == types.ToolsCapability(list_changed=False) and caps.completions is not None
    assert caps.prompts is None and caps.logging is None


async def test_listen_acknowledges_then_streams_plan_and_run_changes(idle_engine: Harness) -> None:
    harness = idle_engine
    async with Client(build_server(harness), mode="2026-07-28") as c:
        await call(c, "plan", {"steps": STEPS})
        run_id = _queued_run(harness)
        uris = ["harness://plan", f"run:{run_id}"]
        async with c.listen(resource_subscriptions=uris, tools_list_changed=True) as sub:
            assert sub.honored.resource_subscriptions == uris and not sub.honored.tools_list_changed
            await call(c, "plan", {"steps": [{**STEPS[0], "status": "done"}]})
            with anyio.fail_after(10):
                assert await sub.__anext__() == ResourceUpdated("harness://plan")
            harness.runs.cancel_tree(run_id)
            with anyio.fail_after(10):
                assert await sub.__anext__() == ResourceUpdated(f"run:{run_id}")


async def test_a_memory_file_edited_by_hand_is_announced(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing commits when a file is edited outside the harness: the watcher's periodic re-check sees it."""
    from mcp_harness.server import subscriptions

    monkeypatch.setattr(subscriptions, "RECHECK_S", 0.05)
    updates = Updates()
    async with Client(build_server(harness), mode="legacy", message_handler=updates) as c:
        await call(c, "write", {"address": "~/memory/hand.md", "content": "one"})
        await _subscribe(c, "harness://memory/hand.md")
        (harness.agent().memory_dir / "hand.md").write_text("edited by hand, longer", encoding="utf-8")
        await updates.wait_for("harness://memory/hand.md")
