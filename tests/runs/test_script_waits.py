"""`ctx.sleep` (HARNESS §9.4): a journaled timer; a short wait holds the execution, a long one parks the run with no
task held and resumes when due, past due resolves at once; parallel sleeps park on the earliest. Driven through the
in-memory MCP client over real SQLite and a real Monty worker, with a controllable clock (`waitkit.Clock`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.runs import script_waits
from mcp_harness.server import build_server
from tests.runs.waitkit import Clock, install_clock, journal_kinds, parked, released, script_runs, start, until

pytestmark = pytest.mark.anyio

HOUR = 3_600_000


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return install_clock(monkeypatch)


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:
        yield c


async def test_a_short_sleep_holds_the_execution_and_journals_timer_then_fired(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = "def main(ctx):\n    before = ctx.now()\n    ctx.sleep(50)\n    return ctx.now() - before >= 50\n"
    async with anyio.create_task_group() as tg:
        answer = await start(tg, client, script).result()
        assert answer["status"] == "succeeded" and answer["output"] is True
        (run,) = script_runs(scripted)
        entries = scripted.runs.journal(run.id)
        timer = next(e for e in entries if e["kind"] == "timer")
        assert timer["key"] == "sleep|50" and isinstance(timer["wakeAt"], int)
        assert [e["kind"] for e in entries if e["key"] == "sleep|50"] == ["timer", "fired"]
        assert run.attempt == 1  # held, never parked: one execution


async def test_a_long_sleep_parks_with_no_task_held_and_resumes_when_due(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = (
        "def main(ctx):\n    ctx.log('info', 'before')\n    ctx.sleep(ctx.hours(2))\n"
        "    ctx.log('info', 'after')\n    return 'rested'\n"
    )
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "timer")
        wake_at = run.wait["wakeAt"] if run.wait else None
        assert isinstance(wake_at, int) and run.not_before == wake_at
        await released(scripted, run.id)  # parked: no task holds it
        assert run.to_info()["wait"] == {"reason": "timer", "wakeAt": wake_at}
        clock.advance(HOUR)  # not yet due: a pump pass leaves it parked
        scripted.engine.wake()
        await anyio.sleep(0.1)
        assert scripted.runs.get(run.id).status == "waiting"
        clock.advance(HOUR)
        scripted.engine.wake()
        answer = await started.result()
        assert answer["status"] == "succeeded" and answer["output"] == "rested"
        kinds = journal_kinds(scripted, run.id)
        assert kinds.count("log") == 2 and kinds.count("timer") == 1 and kinds.count("fired") == 1
        assert scripted.runs.get(run.id).attempt == 2  # executed twice: before the park and after it


async def test_a_sleep_already_past_due_on_replay_resolves_at_once(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = "def main(ctx):\n    ctx.sleep(ctx.minutes(5))\n    return 'late but fine'\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "timer")
        clock.advance(10 * 60_000)  # well past wakeAt
        scripted.engine.wake()
        answer = await started.result()
        assert answer["output"] == "late but fine"
        entries = scripted.runs.journal(run.id)
        assert [e["kind"] for e in entries] == ["timer", "fired"]


async def test_zero_and_negative_sleeps_resolve_at_once_and_bad_ones_are_refused(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = """
def main(ctx):
    ctx.sleep(0)
    ctx.sleep(-5)
    out = []
    for bad in ["soon", None, True]:
        try:
            ctx.sleep(bad)
        except RuntimeError as e:
            out.append(str(e))
    return out
"""
    async with anyio.create_task_group() as tg:
        answer = await start(tg, client, script).result()
        assert answer["status"] == "succeeded"
        assert answer["output"] == ["invalid-input: ctx.sleep(ms) needs a number of milliseconds."] * 3
        (run,) = script_runs(scripted)
        assert [e["key"] for e in scripted.runs.journal(run.id) if e["kind"] == "fired"] == ["sleep|0", "sleep|0"]


async def test_parallel_sleeps_park_on_the_earliest_then_on_the_next(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = """
def main(ctx):
    def nap(hours):
        def thunk():
            ctx.sleep(ctx.hours(hours))
            return hours
        return thunk
    return ctx.parallel([nap(3), nap(1), nap(2)])
"""
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        first = await parked(scripted, "timer")
        wakes = sorted(e["wakeAt"] for e in scripted.runs.journal(first.id) if e["kind"] == "timer")
        assert len(wakes) == 3 and first.not_before == wakes[0]
        clock.advance(HOUR)
        scripted.engine.wake()
        await until(lambda: scripted.runs.get(first.id).not_before == wakes[1], "the park on the second timer")
        clock.advance(2 * HOUR)  # past the last two at once
        scripted.engine.wake()
        answer = await started.result()
        assert answer["output"] == [3, 1, 2]
        kinds = journal_kinds(scripted, first.id)
        assert kinds.count("timer") == 3 and kinds.count("fired") == 3


async def test_parallel_short_sleeps_hold_rather_than_park(client: Client, scripted: Harness, clock: Clock) -> None:
    script = "def main(ctx):\n    return ctx.parallel([lambda: ctx.sleep(30), lambda: ctx.sleep(60)])\n"
    async with anyio.create_task_group() as tg:
        answer = await start(tg, client, script).result()
        assert answer["output"] == [None, None]
        (run,) = script_runs(scripted)
        assert run.attempt == 1 and journal_kinds(scripted, run.id).count("fired") == 2


async def test_the_park_threshold_decides_hold_or_park(
    client: Client, scripted: Harness, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(script_waits, "PARK_THRESHOLD_MS", 1_000)
    script = "def main(ctx):\n    ctx.sleep(5)\n    ctx.sleep(10_000)\n    return 'ok'\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "timer")  # 5 ms was held; 10 s, above the threshold, parks
        assert journal_kinds(scripted, run.id) == ["timer", "fired", "timer"]
        clock.advance(20_000)
        scripted.engine.wake()
        answer: dict[str, Any] = await started.result()
        assert answer["output"] == "ok" and scripted.runs.get(run.id).attempt == 2
