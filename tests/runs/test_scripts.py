"""Script children end to end (HARNESS §6, §9): `delegate {script}` runs Python in Monty, durably, through the
in-memory MCP client, the scripted provider for model children, real SQLite and a real Monty worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.runs.lazy import LazyExecutor
from mcp_harness.runs.script import ScriptExecutor
from mcp_harness.server import build_server
from mcp_harness.verbs import delegate as delegate_verb
from tests.conftest import call, refused, scripted_harness

pytestmark = pytest.mark.anyio

ANSWER = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}

TYPED_SCRIPT = """
def main(ctx):
    got = ctx.delegate({"brief": "Compute the answer", "output": SCHEMA})
    return {"doubled": got["answer"] * 2, "input": ctx.input}
""".replace("SCHEMA", json.dumps(ANSWER))

PARENT_SCRIPT = """
def main(ctx):
    text = ctx.delegate({"brief": "Say hi"})
    return "child said " + text["text"]
"""

RULES: list[dict[str, Any]] = [
    {"when": "Compute the answer", "turns": [{"toolCalls": [{"name": "return_result", "input": {"answer": 21}}]}]},
    {"when": "Say hi", "turns": [{"text": "hi"}]},
    {"when": "Wait forever", "turns": [{"delayMs": 60_000, "text": "too late"}]},
    {
        "when": "Run a script",
        "turns": [
            {"toolCalls": [{"name": "delegate", "input": {"script": PARENT_SCRIPT, "title": "hi"}}]},
            {"text": "ok"},
        ],
    },
    {"turns": [{"text": "default reply"}]},
]


@pytest.fixture
def rules() -> list[dict[str, Any]]:
    """The script of conftest.py's `scripted` harness."""
    return RULES


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:
        yield c


async def run_script(client: Client, script: str, **extra: Any) -> dict[str, Any]:
    with anyio.fail_after(30):
        return await call(client, "delegate", {"script": script, **extra})


async def test_a_script_writes_reads_and_returns_a_value(client: Client, scripted: Harness) -> None:
    script = """
def main(ctx):
    ctx.log("info", "writing", {"n": ctx.input["n"]})
    ctx.call("write", {"address": "~/memory/notes/a.md", "content": "n=" + str(ctx.input["n"])})
    got = ctx.call("read", {"address": "~/memory/notes/a.md", "format": "json"})
    stamp = ctx.now()
    return {"content": got["content"], "stamped": stamp > 0, "run": ctx.run_id, "nothing": None}
"""
    both = await refused(client, "delegate", {"script": script, "brief": "a model child's brief as well"})
    assert "exactly one of brief" in both["message"]
    result = await run_script(client, script, input={"n": 7})
    assert result["status"] == "succeeded" and result["sessionId"] is None
    assert result["output"] == {"content": "n=7", "stamped": True, "run": result["runId"], "nothing": None}
    run = scripted.runs.get(result["runId"])
    assert run.kind == "workflow" and run.max_attempts == 1 and run.title == "Script"
    assert run.source_cid is not None and run.source_cid.startswith("sha256:")
    kinds = [(e["kind"], e["key"].split("|")[0]) for e in scripted.runs.journal(run.id)]
    assert kinds == [
        ("log", "log"),
        ("call", "tool"),
        ("result", "tool"),
        ("call", "tool"),
        ("result", "tool"),
        ("now", "now"),
    ]
    # read run:<id> shows the pinned source.
    info = await call(client, "read", {"address": f"run:{run.id}", "format": "json"})
    assert info["sourceText"] == script and info["kind"] == "workflow"


async def test_none_is_null_and_title_is_kept(client: Client) -> None:
    result = await run_script(client, "def main(ctx):\n    pass\n", title="Quiet one")
    assert result["status"] == "succeeded" and result["output"] is None


async def test_a_scripts_plan_is_kept_on_its_run_and_closed_at_the_end(client: Client, scripted: Harness) -> None:
    script = """
def main(ctx):
    plan = ctx.plan(["Gather", {"label": "Sum", "status": "running"}], title="Work")
    return [s["id"] for s in plan["steps"]]
"""
    result = await run_script(client, script)
    assert result["output"] == ["step-1", "step-2"]
    plan = scripted.runs.get(result["runId"]).plan
    assert plan == {
        "title": "Work",
        "steps": [
            {"id": "step-1", "label": "Gather", "status": "skipped"},
            {"id": "step-2", "label": "Sum", "status": "done"},
        ],
    }


async def test_a_script_delegates_to_a_typed_model_child(client: Client, scripted: Harness) -> None:
    result = await run_script(client, TYPED_SCRIPT, input=[1, 2])
    assert result["status"] == "succeeded", result
    assert result["output"] == {"doubled": 42, "input": [1, 2]}
    script_run = scripted.runs.get(result["runId"])
    (child,) = scripted.runs.children(script_run.id)
    assert child.kind == "agent" and child.status == "succeeded" and child.output == {"answer": 21}
    assert child.parent_tool_call_id is None and child.session_id is not None
    journal = scripted.runs.journal(script_run.id)
    assert [e["kind"] for e in journal] == ["call", "result"]
    assert journal[0]["childRunId"] == child.id


async def test_a_model_childs_failure_reaches_the_script_with_its_code(client: Client) -> None:
    script = """
def main(ctx):
    try:
        schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
        ctx.delegate({"brief": "Compute the answer", "output": schema})
    except RuntimeError as e:
        return str(e)
"""
    result = await run_script(client, script)
    assert result["status"] == "succeeded"
    assert result["output"].startswith("output-schema: ")


async def test_a_model_parent_parks_on_a_script_child_and_gets_the_result(client: Client, scripted: Harness) -> None:
    with anyio.fail_after(30):
        result = await call(client, "delegate", {"brief": "Run a script"})
    assert result["status"] == "succeeded"
    events = scripted.sessions.events(result["sessionId"])
    results = [e.payload for e in events if e.type == "tool_result" and e.payload.get("name") == "delegate"]
    assert len(results) == 1
    output = results[0]["output"]
    assert output["status"] == "succeeded" and output["sessionId"] is None and output["output"] == "child said hi"
    script_run = scripted.runs.get(output["runId"])
    assert script_run.parent_run_id == result["runId"] and script_run.title == "hi"


LINTS = [
    ("def mian(ctx):\n    return 1\n", "must define `def main(ctx):`"),
    ("async def main(ctx):\n    return 1\n", "not `async def`"),
    ("def main(a, b):\n    return 1\n", "exactly one parameter"),
    ("def main(ctx):\n    return 1\ndef main(ctx):\n    return 2\n", "define `main` once"),
    ("import json\ndef main(ctx):\n    return 1\n", "import statements are not allowed"),
    ("from os import path\ndef main(ctx):\n    return 1\n", "import statements are not allowed"),
    ("def main(ctx):\n    return open('x').read()\n", "open("),
    ("def main(ctx):\n    return eval('1')\n", "eval("),
    ("def main(ctx):\n    exec('x = 1')\n", "exec("),
    ("def main(ctx):\n    return __import__('os')\n", "__import__"),
    ("def main(ctx):\n    return random.random()\n", "random"),
    ("def main(ctx):\n    return time.time()\n", "ctx.now()"),
    ("def main(ctx):\n    return datetime.now()\n", "ctx.now()"),
    ("def main(ctx):\n    _harness_op('now')\n", "reserved"),
    ("def main(ctx)\n    return 1\n", "syntax error"),
    ("def main(ctx):\n    return 1\n" + "#" * (256 * 1024), "256 KiB"),
]


@pytest.mark.parametrize(("script", "reason"), LINTS)
async def test_lint_refuses_with_the_reference_message(client: Client, script: str, reason: str) -> None:
    error = await refused(client, "delegate", {"script": script})
    assert error["status"] == 400
    assert error["message"].startswith("Workflow source rejected:\n- "), error["message"]
    assert reason in error["message"]


async def test_detached_scripts_are_refused(client: Client) -> None:
    error = await refused(client, "delegate", {"script": "def main(ctx):\n    return 1\n", "await": False})
    assert error["message"].startswith("Detached script children are not supported: scripts are awaited")


async def test_the_depth_limit_applies(scripted: Harness) -> None:
    agent = scripted.agent()
    session = scripted.sessions.create(scripted.account_id, agent.id)
    parent = None
    for i in range(4):
        parent = scripted.runs.enqueue(
            account_id=scripted.account_id,
            title=f"level {i}",
            origin="user",
            agent_id=agent.id,
            session_id=session.id,
            parent_run_id=parent.id if parent else None,
        )
    assert parent is not None and parent.depth == 3
    with pytest.raises(BadRequest, match=r"^Workflow depth limit reached \(3\)$"):
        delegate_verb.spawn_script(
            scripted,
            agent_id=agent.id,
            parent_session_id=session.id,
            parent_run=parent,
            tool_call_id="call-1",
            arguments={"script": "def main(ctx):\n    return 1\n"},
        )


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        ("ctx.call('no_such_tool', {})", "unknown-tool", "A script can call: read, write"),
        ("ctx.call('read', {'bogus': 1})", "invalid-input", "Invalid input for read"),
        ("ctx.call('read', {'address': 'nowhere:at-all'})", "tool-error", "Unrecognized address"),
        ("ctx.call('execute', {'runtime': 'cobol'})", "invalid-input", "Invalid input for execute"),
        ("ctx.delegate({'title': 'no brief'})", "invalid-input", "requires a `brief`"),
        ("x = [1][5]", "workflow-error", "IndexError"),
        ("undefined_function()", "workflow-error", "NameError"),
    ],
)
async def test_failures_carry_their_codes(client: Client, body: str, code: str, fragment: str) -> None:
    result = await run_script(client, f"def main(ctx):\n    {body}\n    return 1\n")
    assert result["status"] == "failed", result
    assert result["error"]["code"] == code
    assert fragment in result["error"]["message"] and "script.py line 2" in result["error"]["message"]


async def test_a_cpu_burning_loop_exhausts_its_fuel(client: Client, scripted: Harness) -> None:
    executor = scripted.engine.executors["workflow"]
    assert isinstance(executor, LazyExecutor)
    executor = executor.executor()
    assert isinstance(executor, ScriptExecutor)
    executor.fuel_s = 0.3
    result = await run_script(client, "def main(ctx):\n    i = 0\n    while True:\n        i += 1\n")
    assert result["status"] == "failed" and result["error"]["code"] == "fuel-exhausted"
    # Fuel is per slice: many short slices between ctx calls are fine.
    many = (
        "def main(ctx):\n    for _ in range(5):\n        n = 0\n        for i in range(100000):\n"
        "            n += i\n        ctx.now()\n    return n\n"
    )
    assert (await run_script(client, many))["status"] == "succeeded"


async def test_the_journal_cap_fails_the_run(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_harness.runs import script_journal as script_module

    monkeypatch.setattr(script_module, "MAX_JOURNAL_ENTRIES", 5)
    result = await run_script(client, "def main(ctx):\n    for i in range(10):\n        ctx.log('info', str(i))\n")
    assert result["status"] == "failed" and result["error"]["code"] == "journal-cap"


async def test_cancelling_the_client_call_cancels_the_script_and_its_child(client: Client, scripted: Harness) -> None:
    script = "def main(ctx):\n    return ctx.delegate({'brief': 'Wait forever'})\n"
    with anyio.move_on_after(2.0):
        await client.call_tool("delegate", {"script": script})
    with anyio.fail_after(10):
        while True:
            runs = scripted.runs._select("SELECT * FROM runs", ())  # pyright: ignore[reportPrivateUsage]
            if len(runs) == 2 and all(r.status == "canceled" for r in runs):
                break
            await anyio.sleep(0.05)


# -- durability: a restart mid-script -------------------------------------------------------------------------

RESTART_SCRIPT = """
def main(ctx):
    ctx.call("execute", {"runtime": "shell", "code": "echo once >> ledger.txt"})
    ctx.call("write", {"address": "~/memory/state.md", "content": "before the child"})
    got = ctx.delegate({"brief": "Slow then fast", "output": SCHEMA})
    stamp = ctx.now()
    return {"answer": got["answer"], "stamp": stamp}
""".replace("SCHEMA", json.dumps(ANSWER))


def _ledger(data_dir: Path) -> list[str]:
    paths = list(data_dir.glob("agents/*/memory/ledger.txt"))
    return paths[0].read_text().splitlines() if paths else []


async def test_a_restart_mid_script_replays_without_repeating_effects(tmp_path: Path) -> None:
    slow = [{"when": "Slow then fast", "turns": [{"delayMs": 60_000, "text": "never"}]}]
    fast = [{"when": "Slow then fast", "turns": [{"toolCalls": [{"name": "return_result", "input": {"answer": 5}}]}]}]

    first = scripted_harness(tmp_path, slow, "slow.json")
    if "execute" not in first.offered_callables():
        pytest.fail("these tests need the bubblewrap sandbox (execute); see `mcp-harness doctor`")
    agent = first.agent()
    session = first.sessions.create(first.account_id, agent.id)
    call_id = "call-restart"
    first.sessions.append(
        session.id, {"type": "tool_call", "id": call_id, "name": "delegate", "input": {"script": "…"}}, "agent"
    )
    spawned = delegate_verb.spawn_script(
        first,
        agent_id=agent.id,
        parent_session_id=session.id,
        parent_run=None,
        tool_call_id=call_id,
        arguments={"script": RESTART_SCRIPT},
    )
    async with first.engine_running():
        with anyio.fail_after(30):
            while True:
                script_run = first.runs.get(spawned.run_id)
                children = first.runs.children(spawned.run_id)
                if script_run.status == "waiting" and children and children[0].status == "running":
                    break
                await anyio.sleep(0.05)
    stamp_before = [e for e in first.runs.journal(spawned.run_id) if e["kind"] == "now"]
    assert stamp_before == []
    assert first.runs.get(children[0].id).status == "running"  # left running by the shutdown, as a crash would
    assert _ledger(tmp_path / "data") == ["once"]
    first.close()

    second = scripted_harness(tmp_path, fast, "fast.json")
    try:
        async with second.engine_running():
            with anyio.fail_after(30):
                done = await second.engine.wait_for(spawned.run_id)
        assert done.status == "succeeded", done.error
        assert done.output["answer"] == 5
        assert _ledger(tmp_path / "data") == ["once"]  # the journaled execute did not run again
        journal = second.runs.journal(spawned.run_id)
        assert [(e["kind"], e["key"].split("|")[0]) for e in journal] == [
            ("call", "tool"),
            ("result", "tool"),
            ("call", "tool"),
            ("result", "tool"),
            ("call", "agent"),
            ("result", "agent"),
            ("now", "now"),
        ]
        assert len(second.runs.children(spawned.run_id)) == 1  # re-attached, not spawned again
        results = [
            e.payload
            for e in second.sessions.events(session.id)
            if e.type == "tool_result" and e.payload.get("toolCallId") == call_id
        ]
        assert len(results) == 1
        assert results[0]["output"]["status"] == "succeeded" and results[0]["output"]["output"] == done.output
    finally:
        second.close()
