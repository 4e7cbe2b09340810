"""Script children's durability (HARNESS §9.3–§9.4): replay is deterministic, refusals are journaled, a call
journaled without its result is answered `interrupted` and never runs again, fuel exhaustion cannot be caught or
forged, results reach the parent exactly once, and `ctx.parallel` fans model children out at once and re-attaches to
all of them after a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_harness.harness import Harness
from mcp_harness.runs.lazy import LazyExecutor
from mcp_harness.runs.outcomes import INTERRUPTED, Failed, Succeeded
from mcp_harness.runs.resolve import reconcile_at_boot
from mcp_harness.runs.script import ScriptExecutor
from mcp_harness.verbs import delegate as delegate_verb
from tests.conftest import scripted_harness

pytestmark = pytest.mark.anyio

RULES: list[dict[str, Any]] = [
    {"when": "Say hi", "turns": [{"text": "hi"}]},
    {"when": "Slow A", "turns": [{"delayMs": 600, "text": "a"}]},
    {"when": "Slow B", "turns": [{"delayMs": 400, "text": "b"}]},
    {"when": "Slow C", "turns": [{"delayMs": 200, "text": "c"}]},
    {"when": "Forever", "turns": [{"delayMs": 60_000, "text": "never"}]},
    {"turns": [{"text": "default reply"}]},
]


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = scripted_harness(tmp_path, RULES, "rules.json")
    yield harness
    harness.close()


def _spawn(h: Harness, source: str, *, depth: int = 0, script_input: Any = None) -> str:
    """A script child of a model run `depth` levels down (its result lands on that run's session)."""
    agent = h.agent()
    session = h.sessions.create(h.account_id, agent.id)
    parent = None
    for i in range(depth):
        parent = h.runs.enqueue(
            account_id=h.account_id,
            title=f"level {i}",
            origin="user",
            agent_id=agent.id,
            session_id=session.id,
            parent_run_id=parent.id if parent else None,
        )
        with h.db.transaction() as conn:  # parked, so the engine leaves these stand-ins alone
            conn.execute("UPDATE runs SET status = 'waiting' WHERE id = ?", (parent.id,))
    call_id = "call-script"
    h.sessions.append(session.id, {"type": "tool_call", "id": call_id, "name": "delegate", "input": {}}, "agent")
    spawned = delegate_verb.spawn_script(
        h,
        agent_id=agent.id,
        parent_session_id=session.id,
        parent_run=parent,
        tool_call_id=call_id,
        arguments={"script": source, "input": script_input},
    )
    return spawned.run_id


async def _finish(h: Harness, run_id: str) -> Any:
    async with h.engine_running():
        with anyio.fail_after(30):
            return await h.engine.wait_for(run_id)


async def _replay(h: Harness, run_id: str) -> Any:
    """Execute a finished script run again on its journal (as a restart would) and return the outcome."""
    with h.db.transaction() as conn:
        conn.execute("UPDATE runs SET status = 'running' WHERE id = ?", (run_id,))
    executor = h.engine.executors["workflow"]
    assert isinstance(executor, LazyExecutor)
    executor = executor.executor()
    assert isinstance(executor, ScriptExecutor)
    return await executor(h.runs.get(run_id))


def _shape(h: Harness, run_id: str) -> list[tuple[int, str, str]]:
    return [(e["callSeq"], e["kind"], e["key"]) for e in h.runs.journal(run_id)]


REPEATS = """
def main(ctx):
    ctx.log("info", "same")
    ctx.log("info", "same")
    ctx.call("write", {"address": "~/memory/r.md", "content": "x"})
    a = ctx.call("read", {"address": "~/memory/r.md", "format": "json"})
    b = ctx.call("read", {"address": "~/memory/r.md", "format": "json"})
    first = ctx.now()
    second = ctx.now()
    return [a["content"], b["content"], first, second]
"""


async def test_replay_answers_every_effect_from_the_journal_in_order(h: Harness) -> None:
    run_id = _spawn(h, REPEATS)
    done = await _finish(h, run_id)
    assert done.status == "succeeded", done.error
    before = _shape(h, run_id)
    assert [seq for seq, _, _ in before] == [1, 2, 3, 3, 4, 4, 5, 5, 6, 7]
    outcome = await _replay(h, run_id)
    assert outcome == Succeeded(done.output)  # same-key FIFO: the two nows come back in their order
    assert _shape(h, run_id) == before


async def test_replay_continues_call_seq_after_the_journaled_prefix(h: Harness) -> None:
    run_id = _spawn(h, REPEATS)
    await _finish(h, run_id)
    with h.db.transaction() as conn:  # the process died after the first read's result
        conn.execute("DELETE FROM run_journal WHERE run_id = ? AND call_seq > 4", (run_id,))
    outcome = await _replay(h, run_id)
    assert isinstance(outcome, Succeeded)
    assert [seq for seq, _, _ in _shape(h, run_id)] == [1, 2, 3, 3, 4, 4, 5, 5, 6, 7]


async def test_a_call_journaled_without_its_result_is_answered_interrupted_and_never_runs_again(h: Harness) -> None:
    source = 'def main(ctx):\n    return ctx.call("write", {"address": "~/memory/w.md", "content": "once"})\n'
    run_id = _spawn(h, source)
    await _finish(h, run_id)
    memory = h.memory(h.agent()).root / "w.md"
    memory.unlink()  # so a second execution of the write would show
    with h.db.transaction() as conn:  # died mid-call: the call is journaled, its result is not
        conn.execute("DELETE FROM run_journal WHERE run_id = ? AND kind = 'result'", (run_id,))
    outcome = await _replay(h, run_id)
    assert isinstance(outcome, Failed) and outcome.code == "interrupted", outcome
    assert outcome.message.startswith(INTERRUPTED) and outcome.detail == {"tool": "write", "callSeq": 1, "line": 2}
    assert not memory.exists(), "the interrupted write ran again"
    journal = h.runs.journal(run_id)
    assert [(e["callSeq"], e["kind"]) for e in journal] == [(1, "call"), (1, "result")]
    assert journal[1]["error"] == {"code": "interrupted", "message": INTERRUPTED}
    assert await _replay(h, run_id) == outcome, "a later replay answers the same, from the journal"
    assert len(h.runs.journal(run_id)) == 2


CATCHES = """
def main(ctx):
    try:
        ctx.call("write", {"address": "~/memory/w.md", "content": "once"})
    except RuntimeError as e:
        seen = ctx.call("read", {"address": "~/memory/w.md", "format": "json"})
        return {"caught": str(e), "seen": seen["content"]}
    return "not interrupted"
"""


async def test_a_script_can_catch_an_interrupted_call_and_verify_state(h: Harness) -> None:
    run_id = _spawn(h, CATCHES)
    assert (await _finish(h, run_id)).output == "not interrupted"
    with h.db.transaction() as conn:  # died mid-write, after the write itself
        conn.execute("DELETE FROM run_journal WHERE run_id = ? AND kind = 'result'", (run_id,))
    outcome = await _replay(h, run_id)
    assert outcome == Succeeded({"caught": f"interrupted: {INTERRUPTED}", "seen": "once"})
    assert await _replay(h, run_id) == outcome


REFUSED = """
def main(ctx):
    try:
        ctx.delegate({"brief": "Say hi"})
    except RuntimeError as e:
        ctx.log("info", "refused")
        return str(e)
"""


async def test_a_refused_spawn_is_journaled_so_replay_does_not_diverge(h: Harness) -> None:
    run_id = _spawn(h, REFUSED, depth=3)  # the script sits at depth 3: its model child would be at 4
    done = await _finish(h, run_id)
    assert done.status == "succeeded", done.error
    assert "depth limit" in done.output
    shape = _shape(h, run_id)
    assert [(seq, kind) for seq, kind, _ in shape] == [(1, "call"), (1, "result"), (2, "log")]
    result = h.runs.journal(run_id)[1]
    assert result["status"] == "error" and "childRunId" not in h.runs.journal(run_id)[0]
    assert await _replay(h, run_id) == Succeeded(done.output)
    assert _shape(h, run_id) == shape
    assert h.runs.children(run_id) == []


async def test_fuel_exhaustion_cannot_be_caught(h: Harness) -> None:
    executor = h.engine.executors["workflow"]
    assert isinstance(executor, LazyExecutor)
    executor = executor.executor()
    assert isinstance(executor, ScriptExecutor)
    executor.fuel_s = 0.3
    source = (
        "def main(ctx):\n    try:\n        while True:\n            pass\n    except BaseException:\n"
        "        ctx.log('info', 'caught')\n        return 'escaped'\n"
    )
    done = await _finish(h, _spawn(h, source))
    assert done.status == "failed" and done.error["code"] == "fuel-exhausted"


async def test_a_script_cannot_forge_fuel_exhaustion(h: Harness) -> None:
    source = "def main(ctx):\n    raise TimeoutError('turn time limit exceeded: 2001ms > 2000ms')\n"
    done = await _finish(h, _spawn(h, source))
    assert done.status == "failed" and done.error["code"] == "workflow-error"


async def test_a_model_parent_gets_the_scripts_result_once_even_after_reconciliation(h: Harness) -> None:
    run_id = _spawn(h, "def main(ctx):\n    return ctx.delegate({'brief': 'Say hi'})['text']\n", depth=1)
    done = await _finish(h, run_id)
    assert done.status == "succeeded" and done.output == "hi"
    session_id = done.input["parentSessionId"]
    await reconcile_at_boot(h)
    await reconcile_at_boot(h)
    results = [e for e in h.sessions.events(session_id) if e.type == "tool_result"]
    assert len(results) == 1 and results[0].payload["output"]["output"] == "hi"
    assert h.runs.get(done.parent_run_id).status == "queued"  # its parent was woken by the delivery


async def test_cancelling_the_model_parent_cascades_through_the_script(h: Harness) -> None:
    run_id = _spawn(h, "def main(ctx):\n    return ctx.delegate({'brief': 'Forever'})\n", depth=1)
    parent_id = h.runs.get(run_id).parent_run_id
    assert parent_id is not None
    async with h.engine_running():
        with anyio.fail_after(20):
            while not (h.runs.children(run_id) and h.runs.children(run_id)[0].status == "running"):
                await anyio.sleep(0.05)
            await h.engine.cancel(parent_id)
            child = await h.engine.wait_for(h.runs.children(run_id)[0].id)
    assert child.status == "canceled" and h.runs.get(run_id).status == "canceled"


FAN_OUT = """
def main(ctx):
    got = ctx.parallel([
        lambda: ctx.delegate({"brief": "Slow A"})["text"],
        lambda: ctx.delegate({"brief": "Slow B"})["text"],
        lambda: ctx.delegate({"brief": "Slow C"})["text"],
    ])
    again = ctx.delegate_all([{"brief": "Say hi"}, {"brief": "Say hi", "title": "twice"}])
    return got + [r["text"] for r in again]
"""


async def test_parallel_runs_model_children_at_once_and_keeps_their_order(h: Harness) -> None:
    run_id = _spawn(h, FAN_OUT)
    done = await _finish(h, run_id)
    assert done.status == "succeeded", done.error
    assert done.output == ["a", "b", "c", "hi", "hi"]
    children = sorted(h.runs.children(run_id), key=lambda r: r.created_at)
    first = children[:3]
    assert len(children) == 5
    # All three started before any of them finished: they ran side by side, not one after another.
    assert max(c.started_at or 0 for c in first) < min(c.finished_at or 0 for c in first)
    kinds = [e["kind"] for e in h.runs.journal(run_id)]
    assert kinds[:3] == ["call", "call", "call"]  # spawned in one pass before any result was journaled
    assert await _replay(h, run_id) == Succeeded(done.output)


async def test_parallel_settled_and_a_failing_thunk(h: Harness) -> None:
    source = """
def main(ctx):
    settled = ctx.parallel_settled([lambda: ctx.delegate({"brief": "Say hi"})["text"], lambda: 1 / 0])
    try:
        ctx.parallel([lambda: ctx.delegate({"brief": "Forever"}), lambda: ctx.call("nope", {})])
    except RuntimeError as e:
        return [settled, str(e)]
"""
    run_id = _spawn(h, source)
    done = await _finish(h, run_id)
    assert done.status == "succeeded", done.error
    settled, message = done.output
    assert settled[0] == {"ok": True, "value": "hi"}
    assert settled[1]["ok"] is False and settled[1]["error"]["code"] == "workflow-error"
    assert message.startswith("unknown-tool: ")
    forever = [c for c in h.runs.children(run_id) if c.title == "Forever"]
    assert [c.status for c in forever] == ["canceled"]  # the script ended: the child it left behind is stopped


async def test_step_marks_the_plan_and_stamps_children(h: Harness) -> None:
    source = """
def main(ctx):
    ctx.plan(["Greet", "Sum"])
    text = ctx.step("Greet", lambda: ctx.delegate({"brief": "Say hi"})["text"])
    return text
"""
    run_id = _spawn(h, source)
    done = await _finish(h, run_id)
    assert done.status == "succeeded" and done.output == "hi"
    assert [s["status"] for s in (h.runs.get(run_id).plan or {})["steps"]] == ["done", "skipped"]
    (child,) = h.runs.children(run_id)
    assert child.input["planStepLabel"] == "Greet" and child.input["planStepId"] == "step-1"
    steps = [(e["stepId"], e["phase"]) for e in h.runs.journal(run_id) if e["kind"] == "step"]
    assert steps == [("step-1", "start"), ("step-1", "end")]


async def test_a_restart_mid_fan_out_reattaches_every_child(tmp_path: Path) -> None:
    briefs = ["Fan one", "Fan two", "Fan three"]
    slow = [{"when": b, "turns": [{"delayMs": 60_000, "text": "never"}]} for b in briefs]
    fast = [{"when": b, "turns": [{"text": b.split()[1]}]} for b in briefs]
    source = (
        "def main(ctx):\n    return [r['text'] for r in ctx.delegate_all(["
        + ", ".join(f"{{'brief': '{b}'}}" for b in briefs)
        + "])]\n"
    )
    first = scripted_harness(tmp_path, slow, "slow.json")
    run_id = _spawn(first, source)
    async with first.engine_running():
        with anyio.fail_after(30):
            while True:
                run = first.runs.get(run_id)
                kids = first.runs.children(run_id)
                if run.status == "waiting" and len(kids) == 3 and all(k.status == "running" for k in kids):
                    break
                await anyio.sleep(0.05)
    assert sorted((first.runs.get(run_id).wait or {})["childRunIds"]) == sorted(k.id for k in kids)
    first.close()

    second = scripted_harness(tmp_path, fast, "fast.json")
    try:
        done = await _finish(second, run_id)
        assert done.status == "succeeded", done.error
        assert done.output == ["one", "two", "three"]
        assert sorted(c.id for c in second.runs.children(run_id)) == sorted(k.id for k in kids)
        assert [e["kind"] for e in second.runs.journal(run_id)].count("call") == 3
    finally:
        second.close()
