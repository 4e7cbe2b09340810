"""`call` dispatch through the MCP client: `execute` in the sandbox, authored lambdas, promotion, progress."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_harness.binding import SessionBinding
from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, refused

pytestmark = pytest.mark.anyio


def execute(code: str, runtime: str = "python", **extra: Any) -> dict[str, Any]:
    return {"tool": "execute", "input": {"runtime": runtime, "code": code, **extra}}


def lambda_tool(source: str, **fields: Any) -> dict[str, Any]:
    return {"description": "A test tool.", "source": source, "runtime": "python", **fields}


async def test_execute_runs_python_and_shell_over_memory(client: Client) -> None:
    await call(client, "write", {"address": "~/memory/data/in.txt", "content": "3\n4\n"})
    code = (
        "import sys\n"
        "nums = [int(x) for x in open('data/in.txt')]\n"
        "open('data/sum.txt', 'w').write(str(sum(nums)))\n"
        "print('sum', sum(nums)); print(sys.executable, file=sys.stderr)"
    )
    ran = await call(client, "call", execute(code))
    assert ran["success"] is True and ran["exitCode"] == 0
    assert ran["stdout"] == "sum 7\n"
    assert ran["stderr"].strip() == "/usr/bin/python3", "python must be the system interpreter, not the venv's"
    assert ran["changedFiles"] == [{"path": "data/sum.txt", "change": "added"}]
    assert ran["summary"].startswith("Ran python code (exit 0, ") and "1 memory file changed" in ran["summary"]
    assert (await call(client, "read", {"address": "~/memory/data/sum.txt"}))["content"] == "7"
    shell = await call(client, "call", execute("rm data/in.txt; echo fail >&2; exit 3", runtime="shell"))
    assert shell["exitCode"] == 3 and shell["success"] is False and shell["stderr"] == "fail\n"
    assert shell["changedFiles"] == [{"path": "data/in.txt", "change": "removed"}]


async def test_execute_timeout_is_clamped_and_reported(client: Client) -> None:
    with anyio.fail_after(30):
        ran = await call(client, "call", execute("import time; time.sleep(30)", timeout_secs=1))
    assert ran["success"] is False and ran["durationMs"] < 10_000
    assert "stopped at its time limit" in ran["summary"]
    zero = await call(client, "call", execute("print(1)", timeout_secs=0))
    assert zero["summary"].startswith("Input for execute did not match its contract")


async def test_lambdas_run_with_the_reference_abi(client: Client) -> None:
    async def author(name: str, source: str, **fields: Any) -> None:
        await call(
            client, "write", {"address": f"~/tools/{name}", "content": json.dumps(lambda_tool(source, **fields))}
        )

    await author(
        "adder",
        "import asyncio\nasync def main(input):\n    print('adding')\n    await asyncio.sleep(0)\n"
        "    open('added.txt', 'w').write('x')\n    return {'sum': input['a'] + input['b']}\n",
        input={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        output={"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]},
    )
    ran = await call(client, "call", {"tool": "adder", "input": {"a": 2, "b": 5}})
    assert ran["result"] == {"sum": 7} and ran["logs"] == "adding"
    assert ran["changedFiles"] == [{"path": "added.txt", "change": "added"}]
    assert ran["summary"].startswith("Ran adder (") and "1 memory file changed" in ran["summary"]
    miss = await call(client, "call", {"tool": "adder", "input": {"a": "2"}})
    assert miss["summary"].startswith("Input for adder did not match its contract")
    assert (
        "$.a: expected integer, got string" in miss["validationErrors"]
        and "$.b: is required" in miss["validationErrors"]
    )
    assert miss["contract"].startswith("# adder")

    await author("crash", "def main(input):\n    raise ValueError('boom')\n")
    error = await refused(client, "call", {"tool": "crash"})
    assert error["message"].startswith("Tool crash failed (exit 1).") and "ValueError: boom" in error["message"]
    await author("silent", "import os\ndef main(input):\n    os._exit(0)\n")
    error = await refused(client, "call", {"tool": "silent"})
    assert error["message"].startswith("Tool silent finished without returning a value")
    await author(
        "liar",
        "def main(input):\n    return {'n': 'x'}\n",
        output={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    error = await refused(client, "call", {"tool": "liar"})
    assert "returned a value its own output schema rejects: $.n: expected integer, got string" in error["message"]
    await author("nothing", "def main(input):\n    return None\n")
    assert (await call(client, "call", {"tool": "nothing"}))["result"] is None


async def test_lambda_gates_host_runtime_then_the_execute_grant(harness: Harness) -> None:
    async with Client(build_server(harness)) as c:
        ts = lambda_tool("export default (input) => input", runtime="typescript")
        await call(c, "write", {"address": "~/tools/ts_tool", "content": json.dumps(ts)})
        if "ts" not in harness.sandbox_runtimes():
            error = await refused(c, "call", {"tool": "ts_tool"})
            assert "is written in typescript, which this server cannot run" in error["message"]
        await call(
            c,
            "write",
            {"address": "~/tools/py_tool", "content": json.dumps(lambda_tool("def main(i):\n    return 1\n"))},
        )
    agent = harness.agent()
    harness.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "tools": ["search"]}))
    async with Client(build_server(harness)) as c:
        error = await refused(c, "call", {"tool": "py_tool"})
        assert error["status"] == 403 and "not enabled for this agent" in error["message"]


async def test_promotion_lists_touched_callables_and_survives_a_restart(harness: Harness) -> None:
    changed: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append("tools")

    async with Client(build_server(harness), mode="legacy", message_handler=on_message) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert names == ["read", "write", "call", "delegate", "plan"]
        await call(c, "call", {"tool": "bash", "input": {}})  # hallucinated: activates nothing
        await call(c, "read", {"address": "~/tools/web_search"})  # granted but not offered here: nothing
        assert [t.name for t in (await c.list_tools()).tools] == names
        assert changed == []
        await call(c, "read", {"address": "~/tools/execute"})
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert list(tools) == [*names, "execute"]
        assert tools["execute"].input_schema["properties"]["runtime"]["enum"] == list(harness.sandbox_runtimes())
        await anyio.sleep(0.05)
        assert changed == ["tools"], "a handshake-era client hears that its tool list grew"
        direct = await c.call_tool("execute", {"runtime": "shell", "code": "echo promoted"})
        assert not direct.is_error and direct.structured_content is not None
        assert direct.structured_content["stdout"] == "promoted\n"
    session_id = harness.sessions.list(harness.account_id)[0].id
    events = harness.sessions.events(session_id)
    assert [e.payload["name"] for e in events if e.type == "tool_call"][-1] == "call"
    async with Client(build_server(harness, session_id=session_id)) as again:
        assert "execute" in [t.name for t in (await again.list_tools()).tools]


async def test_authored_lambdas_are_promoted_like_builtins_and_the_capability_says_so(harness: Harness) -> None:
    async with Client(build_server(harness), mode="legacy") as c:
        caps = c.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True, (
            "the server sends tools/list_changed, so it declares it"
        )
        add = lambda_tool("def main(input):\n    return {'sum': input['a'] + input['b']}\n")
        add["input"] = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
        await call(c, "write", {"address": "~/tools/add", "content": json.dumps(add)})
        assert "add" not in [t.name for t in (await c.list_tools()).tools], "authoring alone promotes nothing"
        assert (await call(c, "call", {"tool": "add", "input": {"a": 2, "b": 3}}))["result"] == {"sum": 5}
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["add"].input_schema == add["input"] and tools["add"].description == add["description"]
        direct = await c.call_tool("add", {"a": 20, "b": 22})
        assert not direct.is_error and direct.structured_content is not None
        assert direct.structured_content["result"] == {"sum": 42}
        await call(c, "write", {"address": "~/tools/add", "options": {"delete": True}})
        assert "add" not in [t.name for t in (await c.list_tools()).tools], "a deleted lambda is no longer listed"


async def test_user_calls_never_promote(harness: Harness) -> None:
    agent = harness.agent()
    binding = SessionBinding(harness, agent_id=agent.id)
    result, error = await binding.invoke("read", {"address": "~/tools/execute"}, actor="user")
    assert error is None and result is not None
    assert binding.session_id is not None
    async with Client(build_server(harness, session_id=binding.session_id)) as c:
        assert "execute" not in [t.name for t in (await c.list_tools()).tools]


async def test_execute_reports_output_tail_as_progress(client: Client) -> None:
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message:
            messages.append(message)

    code = "import time\nfor i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(0.3)\n"
    result = await client.call_tool("call", execute(code), progress_callback=on_progress)
    assert not result.is_error
    assert messages and "tick" in messages[-1]
    assert any("tick 0" in m for m in messages) and len(messages) >= 2


async def test_without_bubblewrap_execute_and_lambdas_are_not_offered(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-bwrap-here"))
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        assert harness.sandbox_runtimes() == ()
        async with Client(build_server(harness)) as c:
            listing = await call(c, "read", {"address": "~/tools/"})
            assert listing["tools"] == ["search"] and listing["summary"] == "5 verbs and 1 callable tool."
            missing = await call(c, "read", {"address": "~/tools/execute"})
            assert missing["summary"] == "No tool named execute. Here is what you can read and call."
            listed = await call(c, "call", execute("print(1)"))
            assert listed["summary"] == "No callable tool named execute. Here is what you can call."
            await call(
                c,
                "write",
                {"address": "~/tools/py_tool", "content": json.dumps(lambda_tool("def main(i):\n    return 1\n"))},
            )
            error = await refused(c, "call", {"tool": "py_tool"})
            assert "which this server cannot run" in error["message"] and "mcp-harness doctor" in error["message"]
            assert (await call(c, "read", {"address": "~/self"}))["grants"]["callableTools"] == ["search"]
    finally:
        harness.close()


async def test_a_call_the_client_cancels_is_answered_at_once(harness: Harness) -> None:
    """A cancelled call gets its one answer when it is cancelled, not an "interrupted" one at the next boot."""
    async with Client(build_server(harness), mode="legacy") as c:
        with anyio.move_on_after(1.0):
            await c.call_tool("call", execute("sleep 20", runtime="shell"))
        session = harness.sessions.list(harness.account_id)[0]
        with anyio.fail_after(10):
            while not (results := [e for e in harness.sessions.events(session.id) if e.type == "tool_result"]):
                await anyio.sleep(0.05)
    calls = [e for e in harness.sessions.events(session.id) if e.type == "tool_call"]
    assert [r.payload["toolCallId"] for r in results] == [calls[0].payload["id"]]
    assert results[0].payload["error"].startswith("Canceled before it finished")
    assert harness.sessions.open_calls(session.id) == []


async def test_promotion_reads_the_touched_index_which_the_migration_backfills(harness: Harness) -> None:
    """What a session touched is kept as state, not re-derived from its log; an upgraded database gets it back."""
    from mcp_harness.store.migrations import MIGRATIONS
    from mcp_harness.store.touched import touched_name

    (m009,) = [m for m in MIGRATIONS if m.__name__ == "m009_touched_tools"]

    async with Client(build_server(harness), mode="legacy") as c:
        await call(c, "read", {"address": "~/tools/execute"})
        await call(c, "call", {"tool": "nope", "input": {}})
        await call(c, "read", {"address": "~/memory/"})
    session_id = harness.sessions.list(harness.account_id)[0].id
    assert harness.sessions.touched(session_id) == {"execute", "nope"}
    with harness.db.transaction() as conn:  # as before m009: no index at all
        conn.execute("DROP TABLE session_touched")
        m009(conn)
    assert harness.sessions.touched(session_id) == {"execute", "nope"}
    async with Client(build_server(harness, session_id=session_id)) as again:
        assert "execute" in [t.name for t in (await again.list_tools()).tools]
    call_event = {"type": "tool_call", "name": "read", "input": {"address": "~/tools/web_search/"}}
    assert touched_name(call_event, "agent") == "web_search" and touched_name(call_event, "user") is None
