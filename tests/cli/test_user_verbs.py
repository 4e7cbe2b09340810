"""The user holds the same verbs (HARNESS §13): `mcp-harness invoke`, logged as actor `user`."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_harness.cli import main
from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call

pytestmark = pytest.mark.anyio


def _run(data_dir: Path, *argv: str) -> int:
    return main(["invoke", *argv, "--data-dir", str(data_dir)])


async def _arun(data_dir: Path, *argv: str) -> int:
    """The CLI runs its own event loop, so from an async test it runs on a thread of its own."""
    outcome: list[int] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(data_dir, *argv)))
    thread.start()
    await anyio.to_thread.run_sync(thread.join)
    return outcome[0]


async def test_invoke_logs_user_events_the_agent_then_reads(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    harness = Harness(load_settings(data_dir=data_dir))
    session = harness.sessions.create(harness.account_id, harness.agent().id)
    harness.close()
    write = ("write", "--session", session.id, "--address", "~/memory/from-user.md", "--content", "hi")
    assert await _arun(data_dir, *write) == 0
    assert "Wrote from-user.md (2 bytes)." in capsys.readouterr().out
    assert await _arun(data_dir, "read", "--session", session.id, "--address", "~/tools/execute") == 0
    assert capsys.readouterr().out.startswith("# execute")
    code = json.dumps({"runtime": "shell", "code": "cat from-user.md"})
    assert await _arun(data_dir, "call", "--session", session.id, "--tool", "execute", "--input", code, "--json") == 0
    assert json.loads(capsys.readouterr().out)["stdout"] == "hi"
    # A failed execution is itself logged, and the command says so on stderr.
    assert await _arun(data_dir, "read", "--session", session.id, "--address", "~/memory/missing.txt") == 1
    assert "read failed: Memory file not found: missing.txt" in capsys.readouterr().err

    harness = Harness(load_settings(data_dir=data_dir))
    try:
        events = harness.sessions.events(session.id)
        assert [(e.type, e.actor) for e in events] == [("tool_call", "user"), ("tool_result", "user")] * 4
        assert all(e.payload["id"].startswith("user-") for e in events if e.type == "tool_call")
        assert "error" in events[-1].payload
        async with Client(build_server(harness, session_id=session.id)) as c:
            thread = await call(c, "read", {"address": f"thread:{session.id}"})
            assert "user" in thread["markdown"] and "from-user.md" in thread["markdown"]
            # The user's read of ~/tools/execute and call of execute promote nothing.
            assert "execute" not in [t.name for t in (await c.list_tools()).tools]
    finally:
        harness.close()


def test_invoke_refuses_delegate_plan_and_busy_sessions(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    harness = Harness(load_settings(data_dir=data_dir))
    agent = harness.agent()
    session = harness.sessions.create(harness.account_id, agent.id)
    assert _run(data_dir, "delegate", "--session", session.id, "--args", '{"brief": "x"}') == 2
    assert "delegation is a conversational ask; message the agent instead" in capsys.readouterr().err
    assert _run(data_dir, "plan", "--session", session.id, "--args", '{"steps": []}') == 2
    assert "verb must be read, write, or call" in capsys.readouterr().err
    assert _run(data_dir, "read", "--session", "no-such", "--address", "~/self") == 3  # not found
    assert "No thread no-such" in capsys.readouterr().err
    with harness.db.transaction() as conn:
        conn.execute(
            "INSERT INTO runs (id, account_id, root_run_id, kind, agent_id, session_id, origin, title, status, "
            "created_at, updated_at) VALUES ('r1', ?, 'r1', 'agent', ?, ?, 'user', 'turn', 'running', 0, 0)",
            (harness.account_id, agent.id, session.id),
        )
    assert _run(data_dir, "read", "--session", session.id, "--address", "~/self") == 4  # refused: busy
    assert "The agent is working in this thread right now" in capsys.readouterr().err
    assert harness.sessions.events(session.id) == [], "refusals happen before anything is logged"
    with harness.db.transaction() as conn:
        conn.execute("UPDATE runs SET status = 'waiting' WHERE id = 'r1'")  # a parked run does not block
    harness.close()
    assert _run(data_dir, "read", "--session", session.id, "--address", "~/self") == 0
    assert _run(data_dir, "write", "--session", session.id, "--address", "~/memory/x", "--options", "[1]") == 2
    assert "--options must be a JSON object" in capsys.readouterr().err
