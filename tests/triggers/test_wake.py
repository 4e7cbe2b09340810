"""A `wake` continuation (HARNESS §10 `#wakeFromTrigger`): a firing delivers its signal to a script waiting for it
(`ctx.wait_for_event`), the script resumes with the delivery envelope, and a firing nobody waits for is recorded
`no-listener` — its occurrence is spent all the same, so the next one still fires (HARNESS Appendix A, 12)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from mcp_harness.store._util import now_ms
from mcp_harness.triggers.scheduler import Scheduler
from tests.runs.waitkit import parked, released, start
from tests.triggers.triggerkit import HOUR, Clock, firings, save_trigger, schedule

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:
        yield c


async def test_a_wake_trigger_resumes_the_waiting_script_and_a_missed_one_still_moves_on(
    client: Client, scripted: Harness
) -> None:
    clock = Clock(now_ms())  # the server's own scheduler (the real clock) sees nothing due for an hour
    wake = {"kind": "wake", "signal": "approve", "payload": {"ok": True}}
    trigger = save_trigger(
        scripted, "approver", schedule(kind="interval", every=1, unit="hours"), now=clock.now, continuation=wake
    )
    sched = Scheduler(scripted, wake_engine=scripted.engine.wake, clock=clock)
    script = "def main(ctx):\n    return ctx.wait_for_event('approve')\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        await released(scripted, run.id)
        clock.advance(HOUR)
        (delivered,) = await sched.run_once()
        answer = await started.result()
        assert delivered.status == "delivered" and delivered.run_id == run.id and delivered.session_id is None
        assert answer["status"] == "succeeded"
        assert answer["output"] == {"source": "trigger", "signal": "approve", "payload": {"ok": True}}
    # Nobody waits now: the firing says so, and the schedule still moves to its next occurrence.
    clock.advance(HOUR)
    (missed,) = await sched.run_once()
    assert missed.status == "no-listener"
    clock.advance(HOUR)
    await sched.run_once()
    assert [f.status for f in firings(scripted, trigger)] == ["delivered", "no-listener", "no-listener"]
    after = scripted.triggers.get(trigger.id)
    assert after is not None and after.last_fired_at == clock.now
