"""Progress on the lean path (upstream/lean.py): a report our side cannot relay — it raises, or is slow — never holds
up or breaks the other calls on the same server's pipe (each report runs in a task of its own, as the SDK's do)."""

from __future__ import annotations

import sys

import anyio
import pytest

from mcp_harness.callables.upstream import ServerSpec
from mcp_harness.upstream.connection import open_client
from tests.upstream.conftest import FIXTURE

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("failure", [anyio.BrokenResourceError, RuntimeError])
async def test_a_progress_report_that_raises_leaves_the_other_calls_alone(
    tmp_path_factory: pytest.TempPathFactory, failure: type[Exception]
) -> None:
    marks = tmp_path_factory.mktemp("marks")
    spec = ServerSpec(name="fx", command=(sys.executable, str(FIXTURE), str(marks)))
    bystander: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        raise failure("our client went away")

    with anyio.fail_after(30):
        async with open_client(spec, {}, anyio.Event()) as connected:

            async def other() -> None:
                result = await connected.call_tool("slow", {"seconds": 1.0}, None)
                bystander.append(result.content[0].text)  # pyright: ignore[reportAttributeAccessIssue]

            async with anyio.create_task_group() as tg:
                tg.start_soon(other)
                await anyio.sleep(0.2)
                reported = await connected.call_tool("slow", {"seconds": 0.4}, progress)
                assert not reported.is_error
    assert bystander == ["slept 1.0s"]


async def test_a_progress_report_still_waiting_does_not_hold_up_another_calls_answer(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    marks = tmp_path_factory.mktemp("marks")
    spec = ServerSpec(name="fx", command=(sys.executable, str(FIXTURE), str(marks)))
    reporting, release = anyio.Event(), anyio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        reporting.set()
        await release.wait()  # our client's pipe is full: this report waits

    with anyio.fail_after(30):  # a report run in the pipe's reader would hold the echo's answer until then
        async with open_client(spec, {}, anyio.Event()) as connected:
            async with anyio.create_task_group() as tg:
                tg.start_soon(connected.call_tool, "slow", {"seconds": 0.3}, progress)
                await reporting.wait()
                echoed = await connected.call_tool("echo", {"text": "now"}, None)
                assert echoed.structured_content == {"result": "now"}
                release.set()
