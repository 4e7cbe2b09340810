"""Issue 13 points 13 and 8: `runs`, `runs show`, `runs cancel`, `log --follow`, a failed child's error and a
script's `ctx.log` lines in `log` and `read run:`, and what `sessions` calls a child — through the real command."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_harness.runs.outcomes import Failed
from mcp_harness.store.runs import RunStore
from tests.cli.clikit import Cli, session_of

SCRIPT = (
    "def main(ctx):\n"
    "    ctx.log('info', 'hello from the script')\n"
    "    ctx.log('warn', 'second line', {'n': 2})\n"
    "    return {'ok': True}\n"
)
RULES = [
    {"when": "child task", "turns": [{"error": {"status": 400, "message": "bad request upstream"}}]},
    {"when": "background task", "turns": ["Done in the background."]},
    {"when": "slow task", "turns": [{"text": "never seen", "delayMs": 120_000}]},
    {
        "when": "run a script",
        "turns": [{"toolCalls": [{"name": "delegate", "input": {"script": SCRIPT, "title": "Logger"}}]}, "Ran it."],
    },
    {
        "when": "detach",
        "turns": [{"toolCalls": [{"name": "delegate", "input": {"brief": "background task", "await": False}}]}, "ok"],
    },
    {
        "when": "parent task",
        "turns": [
            {
                "toolCalls": [{"name": "delegate", "input": {"brief": "child task: do it", "title": "Child"}}],
                "usage": {"input": 10, "output": 5},
            },
            "The child failed.",
        ],
    },
    {"turns": ["Hello."]},
]


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    """The script of conftest.py's `cli`."""
    return RULES


def test_runs_list_show_and_a_failed_childs_error(cli: Cli) -> None:
    parent_session = session_of(cli("chat", "parent task please")[2])
    runs = cli.json("runs")
    assert [r["title"] for r in runs] == ["Child", "parent task please"], "newest first"
    child, parent = runs
    assert child["parentRunId"] == parent["id"] and parent["usageTotal"] == 15
    assert [r["id"] for r in cli.json("runs", "--status", "failed")] == [child["id"]]
    assert [r["id"] for r in cli.json("runs", "--session", parent_session)] == [parent["id"]]
    listed = cli.ok("runs").splitlines()[1].split("\t")
    assert listed[:4] == [parent["id"], "agent", "succeeded", "parent task please"] and listed[-1] == "15"

    shown = cli.json("runs", "show", parent["id"])
    assert shown["tree"]["children"][0]["id"] == child["id"]
    assert shown["tree"]["children"][0]["error"]["code"] == "config-error"
    assert shown["usageRolledUp"]["total"] == 15 and shown["usageRolledUp"]["runs"] == 1
    text = cli.ok("runs", "--data-dir", str(cli.data), "show", parent["id"])  # a parent flag survives the subcommand
    assert text.startswith(f"Run {parent['id']} (agent) succeeded.\n")
    assert f"{child['id']}  agent  failed" in text and "bad request upstream" in text

    # The child's own log holds only its brief: the run's end follows the events.
    log = cli.ok("log", child["sessionId"]).splitlines()
    assert len(log) == 2 and log[0].endswith("**user**: child task: do it")
    assert log[1].startswith(f"run\t{child['id']}\t") and log[1].endswith(
        "failed (config-error): scripted: bad request upstream"
    )
    read = cli.ok("invoke", "read", "--session", parent_session, "--address", f"run:{child['id']}")
    assert read.startswith(f"Run {child['id']} (agent) failed (config-error): scripted: bad request upstream.")
    read = cli.ok("invoke", "read", "--session", parent_session, "--address", f"run:{parent['id']}")
    assert f"Run {parent['id']} (agent) succeeded." in read and "is succeeded" not in read
    assert "config-error: scripted: bad request upstream" in read, "a failed child's error in its parent's run:"
    parent_log = cli.ok("log", parent_session)
    assert f"← tool result delegate: run {child['id']} failed (config-error)" in parent_log


def test_a_child_that_failed_after_three_500s_says_so(cli: Cli) -> None:
    h = cli.harness()
    agent = h.agent()
    child = h.sessions.create(h.account_id, agent.id, kind="child", title="Flaky")
    h.sessions.append(child.id, {"type": "message", "role": "user", "content": "flaky brief"}, "agent")
    store = RunStore(h.db, retry_base_ms=0, retry_cap_ms=0)
    run = store.enqueue(
        account_id=h.account_id, title="Flaky", origin="agent", agent_id=agent.id, session_id=child.id, max_attempts=3
    )
    for _ in range(3):
        assert store.claim_next("test-engine", kinds=["agent"]) is not None
        store.settle(run.id, Failed(code="provider-error", message="HTTP 500", retryable=True, http_status=500))
    h.close()
    log = cli.ok("log", child.id).splitlines()
    assert log[-1].endswith("failed after 3 attempts (provider-error): HTTP 500")
    shown = cli.ok("runs", "show", run.id)
    assert shown.startswith(f"Run {run.id} (agent) failed after 3 attempts (provider-error): HTTP 500.")


def test_a_scripts_ctx_log_lines_in_runs_show_log_and_read_run(cli: Cli) -> None:
    session = session_of(cli("chat", "run a script now")[2])
    script = next(r for r in cli.json("runs") if r["kind"] == "workflow")
    shown = cli.ok("runs", "show", script["id"])
    assert 'journal (last 2 of 2)\n  #1 log info: hello from the script\n  #2 log warn: second line {"n": 2}' in shown
    assert [e["kind"] for e in cli.json("runs", "show", script["id"])["journalTail"]] == ["log", "log"]
    log = cli.ok("log", session).splitlines()
    assert log[-2:] == [
        f"script\t{script['id']}\t-\t#1 log info: hello from the script",
        f'script\t{script["id"]}\t-\t#2 log warn: second line {{"n": 2}}',
    ]
    read = cli.ok("invoke", "read", "--session", session, "--address", f"run:{script['id']}")
    assert "- ctx.log (last 2 of 2):\n  #1 log info: hello from the script" in read
    data = json.loads(cli.ok("invoke", "read", "--session", session, "--address", f"run:{script['id']}", "--json"))
    assert [line["message"] for line in data["log"]] == ["hello from the script", "second line"]


def test_sessions_names_detached_and_delegated_children(cli: Cli) -> None:
    cli("chat", "detach a helper")
    cli("chat", "parent task please")
    rows = {r["title"]: r for r in cli.json("sessions")}
    assert rows["background task"]["kind"] == "detached child" and rows["background task"]["runId"]
    assert rows["Child"]["kind"] == "child" and rows["Child"]["runId"]
    assert rows["detach a helper"]["kind"] == "conversation" and rows["detach a helper"]["runId"] is None
    lines = {line.split("\t")[-1]: line.split("\t") for line in cli.ok("sessions").splitlines()}
    assert lines["background task"][2:4] == ["detached child", rows["background task"]["runId"]]
    assert lines["Child"][2:4] == ["child", rows["Child"]["runId"]] and lines["detach a helper"][3] == "-"


def test_cancel_a_queued_tree_then_refusals(cli: Cli) -> None:
    h = cli.harness()
    agent = h.agent()
    session = h.sessions.create(h.account_id, agent.id, title="Queued")
    root = h.runs.enqueue(
        account_id=h.account_id, title="Root", origin="user", agent_id=agent.id, session_id=session.id
    )
    child = h.runs.enqueue(account_id=h.account_id, title="Leaf", origin="agent", parent_run_id=root.id)
    h.close()
    out = cli.ok("runs", "cancel", root.id)
    assert out.splitlines()[0] == "Canceled 2 runs."
    assert f"  {child.id}\tagent\twas queued\tLeaf" in out and f"  {root.id}\tagent\twas queued\tRoot" in out
    assert cli.json("runs", "show", root.id)["status"] == "canceled"
    refusal = cli.refused(4, "runs", "cancel", root.id)
    assert refusal == f"mcp-harness: Run {root.id} was already canceled; nothing to cancel.\n"
    assert "No run nope" in cli.refused(3, "runs", "cancel", "nope")


def test_cancel_a_turn_another_process_is_executing(cli: Cli) -> None:
    chat = cli.start("chat", "slow task")
    try:
        rows: list[sqlite3.Row] = []
        while not rows:  # the chat's own engine has claimed its turn and is in the model call
            assert chat.poll() is None, chat.communicate()
            try:
                rows = cli.rows("SELECT id FROM runs WHERE status = 'running'")
            except sqlite3.OperationalError:  # the chat is still creating its tables
                rows = []
            time.sleep(0.05)
        run_id = rows[0]["id"]
        out = cli.ok("runs", "cancel", run_id)
        assert out == f"Canceled 1 run.\n  {run_id}\tagent\twas running\tslow task\n"
        _, err = chat.communicate(timeout=60)
        assert chat.returncode == 1 and f"run {run_id} was canceled" in err.decode()
        assert cli.json("runs", "show", run_id)["status"] == "canceled", "canceled is sticky"
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait()


def test_log_follow_prints_what_a_serve_appends_until_idle(cli: Cli) -> None:
    h = cli.harness()
    agent = h.agent()
    session = h.sessions.create(h.account_id, agent.id, title="Followed")
    h.sessions.append(session.id, {"type": "message", "role": "user", "content": "hello there"}, "user")
    h.runs.enqueue(account_id=h.account_id, title="Turn", origin="user", agent_id=agent.id, session_id=session.id)
    h.close()
    follow = cli.start("log", session.id, "--follow", "--until-idle")
    serve = None
    try:
        assert follow.stdout is not None
        assert follow.stdout.readline().decode().endswith("**user**: hello there\n")  # following from here on
        serve = cli.start("serve")  # executes the queued turn, in another process
        rest, _ = follow.communicate(timeout=60)
        assert follow.returncode == 0
        assert rest.decode().splitlines()[0].split("\t")[::3] == ["agent", "**assistant**: Hello."]
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
        if serve is not None:
            serve.communicate(timeout=60)  # a stdio server stops when its stdin closes


@pytest.mark.anyio
async def test_a_serving_engine_stops_a_run_another_process_canceled(tmp_path: Path) -> None:
    """`runs cancel` from another process ends the row; the engine executing it notices and stops its execution
    (within a second), instead of finishing a two-minute model call whose result would be discarded."""
    from mcp_harness.harness import Harness
    from tests.conftest import scripted_harness

    harness: Harness = scripted_harness(tmp_path, RULES)
    try:
        async with harness.engine_running():
            agent = harness.agent()
            session = harness.sessions.create(harness.account_id, agent.id, title="Slow")
            harness.sessions.append(session.id, {"type": "message", "role": "user", "content": "slow task"}, "user")
            run = harness.runs.enqueue(
                account_id=harness.account_id, title="Slow", origin="user", agent_id=agent.id, session_id=session.id
            )
            harness.engine.wake()
            with anyio.fail_after(20):
                while run.id not in harness.engine.running_ids() or harness.runs.get(run.id).status != "running":
                    await anyio.sleep(0.05)
            with sqlite3.connect(tmp_path / "data" / "harness.db") as other:  # another process's connection
                other.execute("UPDATE runs SET status = 'canceled', finished_at = 1 WHERE id = ?", (run.id,))
            with anyio.fail_after(20):
                while run.id in harness.engine.running_ids():
                    await anyio.sleep(0.05)
            assert harness.runs.get(run.id).status == "canceled", "canceled is sticky"
            assert not any(e.payload.get("role") == "assistant" for e in harness.sessions.events(session.id))
    finally:
        harness.close()
