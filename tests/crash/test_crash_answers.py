"""`kill -9` a real `serve` (or CLI) process at the worst moment for one promise each, restart, and check it held:

- a script child never repeats a side effect: the call the kill cut short is answered `interrupted` on replay (a
  catchable `RuntimeError`, uncaught a run failure with that code), journaled, never run again — for `ctx.call`,
  calls inside `ctx.parallel`, and `ctx.delegate` (whose child is spawned and journaled in one transaction);
- every logged call gets an answer, once, across the crash: an MCP client's `call execute`, a user's CLI call, a
  `delegate` that died before its run existed or before its detached child was reported — while a delegate whose
  child run is still live (a task-mode call, a script's parent call) is answered by that run, not the boot;
- a process booting beside a live one answers none of its calls and requeues none of its runs.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_harness.runs.outcomes import INTERRUPTED
from tests.crash.crashkit import (
    TERMINAL,
    all_terminal,
    answer_problems,
    events,
    ledger,
    memory_dir,
    query,
    require_sandbox,
    results_of,
    runs,
    serving,
    until,
    write_config,
)

pytestmark = pytest.mark.anyio

CHILD_BRIEF = "Crash script child"
HOLD = "while [ ! -e release ]; do sleep 0.05; done"
"""Shell that blocks until the test creates `release` in the memory: a call held open for exactly as long as needed."""
RULES: list[dict[str, Any]] = [
    {
        "when": CHILD_BRIEF,
        "turns": [
            {
                "toolCalls": [
                    {
                        "name": "call",
                        "input": {
                            "tool": "execute",
                            "input": {"runtime": "shell", "code": f"echo child >> ledger.txt; {HOLD}"},
                        },
                    }
                ]
            },
            {"text": "child done"},
        ],
    },
    {
        "when": "Held child",
        "turns": [
            {
                "toolCalls": [
                    {
                        "name": "call",
                        "input": {
                            "tool": "execute",
                            "input": {"runtime": "shell", "code": f"echo held >> ledger.txt; {HOLD}"},
                        },
                    }
                ]
            },
            {"text": "held done"},
        ],
    },
    {"when": "Quick child", "turns": [{"text": "quick done"}]},
]


class Scene:
    """A data dir, its config and one log for every process that runs on it."""

    def __init__(self, tmp: Path) -> None:
        require_sandbox(tmp)
        self.tmp = tmp
        self.data_dir = tmp / "data"
        self.db = self.data_dir / "harness.db"
        self.config = write_config(tmp, RULES)
        self.log_path = tmp / "server.log"
        self.log = self.log_path.open("ab")

    def serve(self) -> Any:
        self.log.write(b"\n---- serve ----\n")
        self.log.flush()
        return serving(self.data_dir, self.config, self.log)

    async def until(self, condition: Any, what: str, timeout: float = 60) -> None:
        await until(condition, what, timeout, self.log_path)

    def client_session(self, call_name: str) -> tuple[str, list[dict[str, Any]]]:
        """The session where the one `tool_call` named `call_name` outside any run's session was logged."""
        run_sessions = {r["session_id"] for r in runs(self.db)}
        for session_id, log in events(self.db).items():
            if session_id not in run_sessions and any(e["type"] == "tool_call" and e["name"] == call_name for e in log):
                return session_id, log
        raise AssertionError(f"no client session with a {call_name} call")


@pytest.fixture
def scene(tmp_path: Path) -> Any:
    s = Scene(tmp_path)
    yield s
    s.log.close()


def unanswered(log: dict[str, list[dict[str, Any]]]) -> set[tuple[str, str]]:
    return {
        (sid, e["id"])
        for sid, session in log.items()
        for e in session
        if e["type"] == "tool_call" and not results_of(session, e["id"])
    }


def ended_or_repeated(scene: Scene, lines: int) -> bool:
    """Every run ended, or the ledger grew past `lines` (an effect ran again: no need to wait for the rest)."""
    return all_terminal(scene.db) or len(ledger(scene.data_dir)) > lines


def script_runs(db: Path) -> list[dict[str, Any]]:
    return [r for r in runs(db) if r["kind"] == "workflow"]


# -- a script child never repeats a completed side effect -----------------------------------------------------------

ONCE = (
    "def main(ctx):\n"
    f"    ctx.call('execute', {{'runtime': 'shell', 'code': 'echo once >> ledger.txt; {HOLD}'}})\n"
    "    return 'done'\n"
)


async def test_a_script_call_cut_by_a_kill_is_answered_interrupted_not_run_again(scene: Scene) -> None:
    async with scene.serve() as first:
        await first.call("delegate", {"script": ONCE})
        await scene.until(lambda: ledger(scene.data_dir) == ["once"], "the script's execute to start sleeping")
        await first.kill()
    async with scene.serve():
        await scene.until(lambda: ended_or_repeated(scene, 1), "the script run to end after the restart")
    assert ledger(scene.data_dir) == ["once"], "the interrupted call ran again"
    (run,) = script_runs(scene.db)
    assert (run["status"], run["error"]["code"], run["attempt"]) == ("failed", "interrupted", 2)
    assert run["error"]["message"].startswith(INTERRUPTED) and run["error"]["tool"] == "execute"
    _, log = scene.client_session("delegate")
    call_id = run["parent_tool_call_id"]
    (answer,) = results_of(log, call_id)
    assert answer["actor"] == "system" and answer["output"]["status"] == "failed"
    assert answer["output"]["error"]["code"] == "interrupted"


PARALLEL = f"""
def main(ctx):
    def quick():
        return ctx.call('execute', {{'runtime': 'shell', 'code': 'echo quick >> ledger.txt'}})['exitCode']
    def held():
        return ctx.call('execute', {{'runtime': 'shell', 'code': 'echo held >> ledger.txt; {HOLD}'}})['exitCode']
    got = ctx.parallel_settled([quick, held])
    return [got[0], got[1]['ok'], got[1]['error']['message'].split(': ', 1)[0] if not got[1]['ok'] else None]
"""


async def test_a_call_inside_ctx_parallel_cut_by_a_kill_is_caught_as_interrupted(scene: Scene) -> None:
    async with scene.serve() as first:
        await first.call("delegate", {"script": PARALLEL})
        await scene.until(lambda: ledger(scene.data_dir) == ["quick", "held"], "the second thunk's call to start")
        await first.kill()
    async with scene.serve():
        await scene.until(lambda: ended_or_repeated(scene, 2), "the script run to end after the restart")
    assert ledger(scene.data_dir) == ["quick", "held"], "a journaled call ran again"
    (run,) = script_runs(scene.db)
    assert (run["status"], run["output"]) == ("succeeded", [{"ok": True, "value": 0}, False, "interrupted"])


DELEGATES = f"""
def main(ctx):
    return ctx.delegate({{'brief': '{CHILD_BRIEF}'}})['text']
"""


async def test_a_kill_while_ctx_delegate_waits_reattaches_to_the_one_child(scene: Scene) -> None:
    def child_mid_call() -> bool:
        kids = [r for r in runs(scene.db) if r["parent_run_id"] is not None and r["kind"] == "agent"]
        return len(kids) == 1 and kids[0]["status"] == "running" and ledger(scene.data_dir) == ["child"]

    async with scene.serve() as first:
        await first.call("delegate", {"script": DELEGATES})
        await scene.until(child_mid_call, "the script's child to be in its execute call")
        await first.kill()
    async with scene.serve():
        await scene.until(lambda: all_terminal(scene.db), "the script and its child to end after the restart")
    (run,) = script_runs(scene.db)
    assert (run["status"], run["output"]) == ("succeeded", "child done")
    children = [r for r in runs(scene.db) if r["parent_run_id"] == run["id"]]
    assert [(c["status"], c["attempt"]) for c in children] == [("succeeded", 2)], "spawned once, resumed once"
    journal = query(scene.db, "SELECT kind FROM run_journal WHERE run_id = ? ORDER BY seq", (run["id"],))
    assert [r["kind"] for r in journal] == ["call", "result"]
    assert ledger(scene.data_dir) == ["child"]


# -- every logged call gets an answer, even across a crash ------------------------------------------------------------


async def test_a_clients_call_cut_by_a_kill_is_answered_at_the_next_boot(scene: Scene) -> None:
    async with scene.serve() as first:
        code = f"echo client >> ledger.txt; {HOLD}"
        await first.call("call", {"tool": "execute", "input": {"runtime": "shell", "code": code}})
        await scene.until(lambda: ledger(scene.data_dir) == ["client"], "the client's execute to start")
        await first.kill()
    session_id, log = scene.client_session("call")
    (call,) = [e for e in log if e["type"] == "tool_call"]
    assert results_of(log, call["id"]) == []
    async with scene.serve():
        # Answered by the boot sweep itself: by the time the server answers `initialize`, it is on record.
        log = events(scene.db)[session_id]
    (answer,) = results_of(log, call["id"])
    assert (answer["actor"], answer["error"], answer["name"]) == ("system", INTERRUPTED, "call")
    assert query(scene.db, "SELECT * FROM open_calls") == []


async def test_a_users_cli_call_cut_by_a_kill_is_answered_at_the_next_boot(scene: Scene) -> None:
    from mcp_harness.config import load_settings
    from mcp_harness.harness import Harness

    h = Harness(load_settings(scene.config, data_dir=scene.data_dir))
    try:
        session_id = h.sessions.create(h.account_id, h.agent().id).id
    finally:
        h.close()
    code = f"echo user >> ledger.txt; {HOLD}"
    argv = [sys.executable, "-m", "mcp_harness", "invoke", "call", "--session", session_id, "--tool", "execute"]
    argv += ["--input", json.dumps({"runtime": "shell", "code": code})]
    argv += ["--data-dir", str(scene.data_dir), "--config", str(scene.config)]
    cli = await anyio.open_process(argv, stderr=scene.log)
    try:
        await scene.until(lambda: ledger(scene.data_dir) == ["user"], "the user's execute to start")
        cli.send_signal(signal.SIGKILL)
        await cli.wait()
    finally:
        await cli.aclose()
    (call,) = [e for e in events(scene.db)[session_id] if e["type"] == "tool_call"]
    assert call["actor"] == "user"
    async with scene.serve():
        log = events(scene.db)[session_id]
    (answer,) = results_of(log, call["id"])
    assert (answer["actor"], answer["error"]) == ("system", INTERRUPTED)


DIES_MID_DELEGATES = """
import os, signal, sys
from pathlib import Path
import anyio
from mcp_harness.config import load_settings
from mcp_harness.binding import SessionBinding
from mcp_harness.harness import Harness
from mcp_harness.verbs.delegate import spawn_for_client

SCRIPT = "def main(ctx):\\n    return ctx.delegate({'brief': 'Quick child'})['text']\\n"
CASES = {
    "before-spawn": None,
    "detached": {"brief": "Quick child detached", "await": False},
    "task": {"brief": "Quick child as a task"},
    "script": {"script": SCRIPT},
}

async def main():
    h = Harness(load_settings(Path(sys.argv[2]), data_dir=Path(sys.argv[1])))
    ctx = SessionBinding(h, agent_id=h.agent().id).context_sync()
    ready = []

    async def case(name, spawn):
        async def start(c):
            if spawn is not None:
                await spawn_for_client(c, spawn)  # the child's run now exists; its call's answer never will
            ready.append(name)
            await anyio.sleep_forever()
        await h.start_async(ctx, "delegate", spawn or {"brief": "never spawned"}, start)

    async with anyio.create_task_group() as tg:
        for name, spawn in CASES.items():
            tg.start_soon(case, name, spawn)
        while len(ready) < len(CASES):
            await anyio.sleep(0.01)
        print(ctx.session_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

anyio.run(main)
"""


async def test_delegate_calls_a_kill_left_open_are_answered_by_the_boot_or_by_their_live_run(scene: Scene) -> None:
    argv = [sys.executable, "-c", DIES_MID_DELEGATES, str(scene.data_dir), str(scene.config)]
    died = await anyio.run_process(argv, check=False, stderr=scene.log)
    assert died.returncode == -signal.SIGKILL, died
    session_id = died.stdout.decode().strip()
    calls = {
        e["input"].get("brief") or "script": e["id"] for e in events(scene.db)[session_id] if e["type"] == "tool_call"
    }
    assert len(calls) == 4 and all(results_of(events(scene.db)[session_id], c) == [] for c in calls.values())
    by_brief = {r["input"].get("spec", {}).get("input"): r for r in runs(scene.db)}

    async with scene.serve():
        at_boot = events(scene.db)[session_id]
        await scene.until(lambda: all_terminal(scene.db), "the children to end")
    log = events(scene.db)[session_id]
    assert answer_problems({session_id: log}) == []
    for brief in ("never spawned", "Quick child detached"):  # no run will answer these: the boot did, at once
        (answer,) = results_of(at_boot, calls[brief])
        assert (answer["actor"], answer["error"]) == ("system", INTERRUPTED), brief
    for brief in ("Quick child as a task", "script"):  # their runs were live: each answered with its own result
        (answer,) = results_of(log, calls[brief])
        assert answer["output"]["status"] == "succeeded", f"the boot answered {brief} while its run was live"
    assert (
        by_brief["Quick child as a task"]["id"] == results_of(log, calls["Quick child as a task"])[0]["output"]["runId"]
    )
    detached = [r for r in runs(scene.db) if r["title"].startswith("Quick child detached")]
    assert [r["status"] for r in detached] == ["succeeded"], "the detached child itself still ran"


# -- two live processes on one data dir -------------------------------------------------------------------------------


async def test_a_second_process_booting_leaves_the_first_ones_calls_and_runs_alone(scene: Scene) -> None:
    def in_flight() -> bool:
        children = [r for r in runs(scene.db) if r["kind"] == "agent"]
        return sorted(ledger(scene.data_dir)) == ["a-call", "held"] and [c["status"] for c in children] == ["running"]

    async with scene.serve() as first:
        execute = {"tool": "execute", "input": {"runtime": "shell", "code": f"echo a-call >> ledger.txt; {HOLD}"}}
        call_reply = await first.call("call", execute)
        delegate_reply = await first.call("delegate", {"brief": "Held child"})
        await scene.until(in_flight, "the first process's call and child to be mid-execute")
        (child,) = runs(scene.db)
        open_before = unanswered(events(scene.db))
        assert len(open_before) == 3  # the client's call and delegate, and the child's own call

        async with scene.serve() as second:
            await second.result("read", {"address": "~/self"})  # the second process has booted and serves
            (after,) = runs(scene.db)
            assert (after["status"], after["lease_owner"], after["attempt"]) == ("running", child["lease_owner"], 1)
            assert unanswered(events(scene.db)) == open_before
            (memory_dir(scene.data_dir) / "release").touch()
            assert (await first.reply(call_reply))["result"]["structuredContent"]["exitCode"] == 0
            delegated = (await first.reply(delegate_reply))["result"]["structuredContent"]
    assert (delegated["status"], delegated["output"]) == ("succeeded", {"text": "held done"})
    (done,) = runs(scene.db)
    assert (done["status"], done["attempt"]) == ("succeeded", 1), "the child ran once, in the first process"
    assert sorted(ledger(scene.data_dir)) == ["a-call", "held"]
    log = events(scene.db)
    assert answer_problems(log) == []
    assert all(e["actor"] != "system" for session in log.values() for e in session if e["type"] == "tool_result")
    assert all(r["status"] in TERMINAL for r in runs(scene.db))
