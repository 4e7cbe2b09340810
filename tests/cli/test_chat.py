"""Issue 13 point 14: `mcp-harness chat` talks to an agent from the terminal — one message, or one turn per line of
stdin — printing the turn's events as they are appended; through the real command."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.clikit import Cli, session_of

RULES = [
    {"when": "broken", "turns": [{"error": {"status": 401, "message": "bad key"}}]},
    {
        "turns": [
            {"text": "Let me look.", "toolCalls": [{"name": "read", "input": {"address": "~/self"}}]},
            "Hello from the agent.",
            "Second answer.",
        ]
    },
]


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    """The script of conftest.py's `cli`."""
    return RULES


def test_one_message_prints_the_turn_and_the_session_continues(cli: Cli) -> None:
    code, out, err = cli("chat", "hi there")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "assistant: Let me look."
    assert lines[1] == '  → tool call read {"address": "~/self"}'
    assert lines[2].startswith('  ← tool result read: You are "assistant"')
    assert lines[3] == "assistant: Hello from the agent."
    session = session_of(err)
    log = cli.ok("log", session).splitlines()
    assert log[0].split("\t")[0] == "user" and log[0].endswith("**user**: hi there"), "the message is the user's"

    events = cli.json("chat", "--session", session, "and again")
    assert [(e["type"], e["actor"]) for e in events] == [("message", "user"), ("message", "agent")]
    assert events[0]["content"] == "and again" and events[1]["content"] == "Second answer."
    assert [r["status"] for r in cli.json("runs", "--session", session)] == ["succeeded", "succeeded"]
    assert json.loads(cli.ok("sessions", "--json"))[0]["id"] == session, "no new session for --session"


def test_stdin_lines_are_turns_of_one_conversation(cli: Cli) -> None:
    code, out, err = cli("send", stdin="first line\n\nsecond line\n")
    assert code == 0, err
    assert out.splitlines()[-1] == "assistant: Second answer."
    session = session_of(err)
    assert err.count("Session ") == 1
    users = [line for line in cli.ok("log", session).splitlines() if line.startswith("user\t")]
    assert [u.rsplit(": ", 1)[1] for u in users] == ["first line", "second line"], "a blank line is no turn"


def test_a_failed_turn_and_refusals(cli: Cli) -> None:
    code, out, err = cli("chat", "broken please")
    assert code == 1 and out == "" and "failed (config-error): scripted: bad key" in err
    session = session_of(err)
    h = cli.harness()
    h.runs.enqueue(
        account_id=h.account_id, title="Busy", origin="user", agent_id=h.agent().id, session_id=session
    )  # a turn nobody executes yet
    h.close()
    assert "working in this thread right now" in cli.refused(4, "chat", "--session", session, "hello")
    assert "No agent named 'nope'" in cli.refused(3, "chat", "--agent", "nope", "hello")
    assert "No thread nope" in cli.refused(3, "chat", "--session", "nope", "hello")
