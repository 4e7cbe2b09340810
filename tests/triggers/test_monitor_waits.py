"""The monitor's first step for each event (HARNESS §10 `processActivityEvent`): a script parked on
`ctx.wait_for_event(match={eventType, resource})` under a running server is woken by a real comment, once, and the
same comment still fires the matching trigger."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.hypermedia.activity_kit import comment
from tests.runs.waitkit import parked, released, start
from tests.triggers.monitorkit import watch, world
from tests.triggers.triggerkit import firings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:  # the server runs the engine and the monitor
        yield c


async def test_a_waiting_script_is_woken_by_a_comment_and_the_trigger_still_fires(
    client: Client, scripted: Harness
) -> None:
    w = world(scripted)
    trigger = watch(scripted, w.agent, "comments", {"type": "document-comment", "resource": w.post})
    script = f"""
def main(ctx):
    seen = ctx.wait_for_event(match={{"eventType": "comment", "resource": "{w.post}"}})
    return [seen["source"], seen["payload"]["author"], seen["payload"]["key"]]
"""
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        await released(scripted, run.id)
        said = comment(scripted.hypermedia, w.bob, w.alice.account_id, "/post", "Anyone there?")
        answer = await started.result()
        assert answer["status"] == "succeeded"
        assert answer["output"] == ["activity", w.bob.account_id, f"blob-{said.cid}"]
        (firing,) = firings(scripted, trigger)
        assert firing.dedupe_key == f"blob-{said.cid}"
        events = [e for e in scripted.runs.journal(run.id) if e["kind"] == "event"]
        assert len(events) == 1  # delivered once
