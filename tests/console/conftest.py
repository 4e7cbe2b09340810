"""What the console suites share: a harness with two agents ("assistant" and "other"), each with a session holding
a conversation and a run tree built straight in the stores (no engine), and the console's app over it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.config import HttpSettings
from mcp_harness.harness import Harness
from mcp_harness.runs.outcomes import Failed, Succeeded
from mcp_harness.server import build_server, http_app
from tests.conftest import owner_and_other, scripted_harness
from tests.console.browser import Browser, start_chromium, stop_chromium


@dataclass
class World:
    harness: Harness
    agents: dict[str, str]
    """Agent name → id."""
    sessions: dict[str, str]
    """Each agent's conversation."""
    roots: dict[str, str]
    """Each agent's root run (waiting on its children)."""
    children: dict[str, list[str]]
    """Each agent's two child runs: one succeeded (30 tokens), one failed."""
    http: HttpSettings


def build_world(harness: Harness) -> World:
    http = owner_and_other(harness)
    agents = {a.definition.name: a.id for a in harness.agents.list(harness.account_id)}
    world = World(harness, agents, {}, {}, {}, http)
    for name, agent_id in agents.items():
        session = harness.sessions.create(harness.account_id, agent_id, title=f"{name} trip")
        harness.sessions.append(
            session.id, {"type": "message", "role": "user", "content": f"secret-{name} plan"}, "user"
        )
        call = {"type": "tool_call", "id": f"call-{name}", "name": "read", "input": {"address": "~/memory/a.md"}}
        harness.sessions.append(session.id, call, "agent")
        harness.sessions.append(
            session.id,
            {"type": "tool_result", "toolCallId": f"call-{name}", "name": "read", "output": {"summary": "read a.md"}},
            "agent",
        )
        harness.sessions.append(session.id, {"type": "tool_call", "id": f"open-{name}", "name": "call"}, "agent")
        runs = harness.runs
        root = runs.enqueue(
            account_id=harness.account_id, title=f"{name} root", origin="user", agent_id=agent_id, session_id=session.id
        )
        kids = [
            runs.enqueue(
                account_id=harness.account_id,
                title=f"{name} child {i}",
                origin="agent",
                agent_id=agent_id,
                parent_run_id=root.id,
            )
            for i in (1, 2)
        ]
        runs.add_usage(root.id, {"input": 5, "output": 5})
        runs.add_usage(kids[0].id, {"input": 20, "output": 10})
        for kid, outcome in zip(kids, (Succeeded({"ok": True}), Failed("provider-error", "boom")), strict=True):
            with harness.db.transaction() as conn:
                conn.execute("UPDATE runs SET status = 'running', started_at = created_at WHERE id = ?", (kid.id,))
            runs.finalize(kid.id, outcome)
        with harness.db.transaction() as conn:
            conn.execute("UPDATE runs SET status = 'running', started_at = created_at WHERE id = ?", (root.id,))
        runs.park(root.id, {"reason": "children", "toolCallIds": ["a", "b"]})
        harness.sessions.set_plan(
            session.id,
            {
                "steps": [
                    {"id": "s1", "label": "Look", "status": "done", "resolvedBy": "runtime"},
                    {"id": "s2", "label": "Book", "status": "running"},
                ]
            },
        )
        world.sessions[name], world.roots[name], world.children[name] = session.id, root.id, [k.id for k in kids]
    return world


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    harness = scripted_harness(tmp_path, [{"turns": [{"text": "done"}]}])
    harness.agent()
    yield build_world(harness)
    harness.close()


def console_app(world: World, *, tokens: bool = True, host: str = "127.0.0.1", loopback: bool | None = None):  # noqa: ANN201
    http = world.http if tokens else HttpSettings()
    return http_app(build_server(world.harness), host=host, http=http, loopback=loopback, console=world.harness)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium per test module (Debian's, through its chromedriver: tests/console/browser.py)."""
    driver, profile = start_chromium()
    yield driver
    stop_chromium(driver, profile)


@pytest.fixture
def browser(chromium: Any) -> Iterator[Browser]:
    yield Browser(chromium)
    chromium.get("about:blank")  # the next test starts on a page with no stream open
