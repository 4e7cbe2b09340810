"""What the script-waits suites share: a controllable clock, a client over a scripted harness, and ways to start a
script and watch its run without sleeping on timing."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.runs.records import RunRecord
from mcp_harness.store import _util


class Clock:
    """Wall-clock milliseconds as every `now_ms()` reads them: the real clock plus an offset that `advance` grows,
    so an hour-long sleep is due the moment a test says so, and nothing else notices."""

    def __init__(self) -> None:
        self.offset_s = 0.0

    def time(self) -> float:
        return time.time() + self.offset_s

    def advance(self, ms: int) -> None:
        self.offset_s += ms / 1000


def install_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(_util, "time", clock)  # `now_ms` reads `time.time()` through its module's name
    return clock


class Started:
    """A `delegate {script}` call running in the background: its answer once it comes, and its script run."""

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None
        self.done = anyio.Event()

    async def result(self, timeout: float = 30) -> dict[str, Any]:
        with anyio.fail_after(timeout):
            await self.done.wait()
        assert self.answer is not None
        return self.answer


def start(tg: TaskGroup, client: Client, script: str, **extra: Any) -> Started:
    started = Started()

    async def go() -> None:
        result = await client.call_tool("delegate", {"script": script, **extra})
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        started.answer = result.structured_content
        started.done.set()

    tg.start_soon(go)
    return started


def script_runs(h: Harness) -> list[RunRecord]:
    return h.runs._select("SELECT * FROM runs WHERE kind = 'workflow' ORDER BY created_at, id", ())  # pyright: ignore[reportPrivateUsage]


async def until(condition: Callable[[], Awaitable[bool] | bool], what: str, timeout: float = 20) -> None:
    """Poll until `condition` holds (a run's row has no event to await here), or fail saying `what`."""
    try:
        with anyio.fail_after(timeout):
            while True:
                got = condition()
                if not isinstance(got, bool):
                    got = await got
                if got:
                    return
                await anyio.sleep(0.02)
    except TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


async def parked(h: Harness, reason: str | None = None, count: int = 1) -> RunRecord:
    """The (newest) script run once it is waiting (on `reason`, when given)."""

    def check() -> bool:
        runs = [r for r in script_runs(h) if r.status == "waiting"]
        return len(runs) >= count and (reason is None or (runs[-1].wait or {}).get("reason") == reason)

    await until(check, f"a script run waiting on {reason or 'anything'}")
    return [r for r in script_runs(h) if r.status == "waiting"][-1]


async def released(h: Harness, run_id: str) -> None:
    """Once parked, the execution winds down (the interpreter stops) and no task holds the run any more."""
    await until(lambda: run_id not in h.engine.running_ids(), f"run {run_id}'s execution to end")


def journal_kinds(h: Harness, run_id: str) -> list[str]:
    return [e["kind"] for e in h.runs.journal(run_id)]
