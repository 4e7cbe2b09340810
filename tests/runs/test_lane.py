"""The engine's store lane: calls that queue up commit together, a failing one rolls back alone, answers come after
the commit, `first` goes ahead, and a cancelled caller's call runs only if the lane had already taken it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from anyio import wait_all_tasks_blocked

from mcp_harness.runs import lane as lane_module
from mcp_harness.runs.lane import StoreLane
from mcp_harness.store.db import Database
from tests.runs.conftest import Gate


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """SQLite only: the lane exists to batch commits behind SQLite's single writer, and these tests pin its commit
    counts there; the engine suites that run through it run on both backends."""
    database = Database(tmp_path / "h.db")
    yield database
    database.close()


@dataclass
class _Store:
    db: Database


def _lane(db: Database) -> StoreLane:
    with db.transaction() as conn:
        conn.execute("CREATE TABLE lane_test (n INTEGER PRIMARY KEY, x TEXT)")
    return StoreLane(_Store(db))


def _insert(db: Database, x: str, fail: bool = False) -> str:
    with db.transaction() as conn:
        conn.execute("INSERT INTO lane_test (x) VALUES (?)", (x,))
        if fail:
            raise ValueError(f"{x} failed")
    return x


def _rows(db: Database) -> list[str]:
    with db.reading() as conn:
        return [r[0] for r in conn.execute("SELECT x FROM lane_test ORDER BY n")]


@pytest.mark.anyio
async def test_queued_calls_commit_once_and_a_failing_one_rolls_back_alone(db: Database) -> None:
    lane = _lane(db)
    commits: list[int] = []
    db.on_every_commit(lambda: commits.append(1))
    gate = Gate()
    results: dict[str, Any] = {}

    async def submit(name: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            results[name] = await lane.call(fn, *args)
        except ValueError as exc:
            results[name] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "gate", gate)
        await gate.held()
        tg.start_soon(submit, "a", _insert, db, "a")
        await wait_all_tasks_blocked()
        tg.start_soon(submit, "b", _insert, db, "b", True)
        await wait_all_tasks_blocked()
        tg.start_soon(submit, "c", _insert, db, "c")
        await wait_all_tasks_blocked()
        commits.clear()
        gate.opened.set()

    assert results["a"] == "a" and results["c"] == "c"
    assert isinstance(results["b"], ValueError) and str(results["b"]) == "b failed"
    assert _rows(db) == ["a", "c"]
    assert commits == [1]  # the three queued calls shared one commit


@pytest.mark.anyio
async def test_an_answer_comes_after_its_commit(db: Database) -> None:
    lane = _lane(db)
    committed: list[str] = []

    def write() -> bool:
        with db.transaction():
            _insert(db, "x")
            db.after_commit(lambda: committed.append("x"))
        return True

    assert await lane.call(write)
    assert committed == ["x"] and _rows(db) == ["x"]


@pytest.mark.anyio
async def test_first_goes_ahead_of_the_calls_still_waiting(db: Database) -> None:
    lane = _lane(db)
    gate = Gate()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.call, gate)
        await gate.held()
        for x in ("a", "b"):
            tg.start_soon(lane.call, _insert, db, x)
            await wait_all_tasks_blocked()
        tg.start_soon(lambda: lane.call(_insert, db, "first", first=True))
        await wait_all_tasks_blocked()
        gate.opened.set()
    assert _rows(db) == ["first", "a", "b"]


@pytest.mark.anyio
async def test_a_cancelled_call_runs_only_if_the_lane_had_taken_it(db: Database) -> None:
    lane = _lane(db)
    gate = Gate()
    outcomes: dict[str, str] = {}

    async def submit(name: str, fn: Callable[..., Any], scope: anyio.CancelScope) -> None:
        with scope:
            await lane.call(fn)
            outcomes[name] = "answered"
            return
        outcomes[name] = "cancelled"

    held, waiting = anyio.CancelScope(), anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, "held", gate, held)
        await gate.held()
        tg.start_soon(submit, "waiting", lambda: _insert(db, "never"), waiting)
        await wait_all_tasks_blocked()
        waiting.cancel()  # not taken yet: it leaves the queue and never runs
        held.cancel()  # taken: it runs to its end, and its caller sees the cancellation after
        await wait_all_tasks_blocked()
        assert "held" not in outcomes  # still waiting for the gate, shielded
        gate.opened.set()
    assert outcomes == {"held": "cancelled", "waiting": "cancelled"}
    assert _rows(db) == []
    assert await lane.call(_insert, db, "after") == "after"  # the lane goes on


@pytest.mark.anyio
async def test_the_lanes_thread_ends_when_idle_and_a_later_call_starts_another(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lane_module, "IDLE_S", 0.0)
    lane = _lane(db)
    assert await lane.call(_insert, db, "one") == "one"
    first = lane._thread  # pyright: ignore[reportPrivateUsage]
    if first is not None:
        await anyio.to_thread.run_sync(first.join, 30)
    assert lane._thread is None  # pyright: ignore[reportPrivateUsage]
    assert await lane.call(_insert, db, "two") == "two"
    assert _rows(db) == ["one", "two"]


class _Inserts:
    """A batch function: inserts its items in one transaction, failing whole on an item named 'bad'."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.runs: list[list[str]] = []

    def __call__(self, items: list[str]) -> list[str]:
        self.runs.append(list(items))
        with self.db.transaction() as conn:
            for x in items:
                conn.execute("INSERT INTO lane_test (x) VALUES (?)", (x,))
                if x == "bad":
                    raise ValueError("bad failed")
        return [x.upper() for x in items]


@pytest.mark.anyio
async def test_batch_calls_waiting_together_run_as_one_call_and_each_gets_its_result(db: Database) -> None:
    lane = _lane(db)
    inserts = _Inserts(db)
    gate = Gate()
    results: dict[str, Any] = {}

    async def submit(x: str) -> None:
        results[x] = await lane.call_batch(inserts, x)

    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.call, gate)
        await gate.held()
        for x in ("a", "b", "c"):
            tg.start_soon(submit, x)
            await wait_all_tasks_blocked()
        tg.start_soon(lane.call, _insert, db, "plain")  # another function's call: not in the batch
        await wait_all_tasks_blocked()
        tg.start_soon(submit, "d")  # behind the plain call, still taken with the batch
        await wait_all_tasks_blocked()
        gate.opened.set()

    assert inserts.runs == [["a", "b", "c", "d"]]
    assert results == {"a": "A", "b": "B", "c": "C", "d": "D"}
    assert _rows(db) == ["a", "b", "c", "d", "plain"]


@pytest.mark.anyio
async def test_a_failing_batch_runs_again_item_by_item_and_only_the_bad_item_fails(db: Database) -> None:
    lane = _lane(db)
    inserts = _Inserts(db)
    gate = Gate()
    results: dict[str, Any] = {}

    async def submit(x: str) -> None:
        try:
            results[x] = await lane.call_batch(inserts, x)
        except ValueError as exc:
            results[x] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.call, gate)
        await gate.held()
        for x in ("a", "bad", "c"):
            tg.start_soon(submit, x)
            await wait_all_tasks_blocked()
        gate.opened.set()

    assert inserts.runs == [["a", "bad", "c"], ["a"], ["bad"], ["c"]]
    assert results["a"] == "A" and results["c"] == "C"
    assert isinstance(results["bad"], ValueError) and str(results["bad"]) == "bad failed"
    assert _rows(db) == ["a", "c"]  # the whole first run rolled back, the bad item's own run too


@pytest.mark.anyio
async def test_a_batch_call_alone_runs_as_a_batch_of_one(db: Database) -> None:
    lane = _lane(db)
    inserts = _Inserts(db)
    assert await lane.call_batch(inserts, "x") == "X"
    assert inserts.runs == [["x"]] and _rows(db) == ["x"]


@pytest.mark.anyio
async def test_a_batch_takes_at_most_max_batch_items(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_module, "MAX_BATCH", 2)
    lane = _lane(db)
    inserts = _Inserts(db)
    gate = Gate()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lane.call, gate)
        await gate.held()
        for x in ("a", "b", "c"):
            tg.start_soon(lane.call_batch, inserts, x)
            await wait_all_tasks_blocked()
        gate.opened.set()
    assert inserts.runs == [["a", "b"], ["c"]]
