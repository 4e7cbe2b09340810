"""Fixtures and fakes the run suites share: a database with one account and agent, its run store, and a fake
executor that records what it ran."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import cbor2
import pytest

from mcp_harness.runs import Outcome, RunEngine, RunRecord, Succeeded
from mcp_harness.store.db import Database
from mcp_harness.store.runs import RunStore
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)

ACCOUNT = "acct"


@pytest.fixture
def db(any_db: Database) -> Database:
    """The engine and run suites' database, on each backend in turn (issue 21: the engine suites run on both)."""
    seed(any_db)
    return any_db


def seed(database: Database) -> None:
    """The account and agent the suites' runs belong to."""
    with database.transaction() as conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (?, 'tester', 0)", (ACCOUNT,))
        conn.execute(
            "INSERT INTO agents (id, account_id, name, definition_cbor, state_dir, created_at, updated_at) "
            "VALUES ('agent', ?, 'tester', ?, '/nonexistent', 0, 0)",
            (ACCOUNT, cbor2.dumps({})),
        )


@pytest.fixture
def store(db: Database) -> RunStore:
    return RunStore(db)


def session(db: Database, session_id: str) -> str:
    with db.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO sessions (id, account_id, agent_id, created_at, updated_at) "
            "VALUES (?, ?, 'agent', 0, 0)",
            (session_id, ACCOUNT),
        )
    return session_id


def add(store: RunStore, title: str = "task", **kwargs: Any) -> RunRecord:
    kwargs.setdefault("origin", "user")
    return store.enqueue(account_id=ACCOUNT, title=title, **kwargs)


def set_created(db: Database, run_id: str, created_at: int) -> None:
    with db.transaction() as conn:
        conn.execute("UPDATE runs SET created_at = ? WHERE id = ?", (created_at, run_id))


@asynccontextmanager
async def serving(engine: RunEngine) -> AsyncIterator[RunEngine]:
    async with anyio.create_task_group() as tg:
        await tg.start(engine.serve)
        try:
            yield engine
        finally:
            tg.cancel_scope.cancel()


def recorder(engine: RunEngine) -> list[tuple[str, str]]:
    """Record every finalize hook call as (run id, status)."""
    seen: list[tuple[str, str]] = []

    async def hook(run: RunRecord) -> None:
        seen.append((run.id, run.status))

    engine.on_finalized.append(hook)
    return seen


class Fake:
    """A fake executor: runs `behave` (default: succeed), recording calls and how many ran at once."""

    def __init__(self, behave: Callable[[RunRecord], Awaitable[Outcome]] | None = None) -> None:
        self.behave = behave
        self.calls: list[RunRecord] = []
        self.active: set[str] = set()
        self.peak = 0

    async def __call__(self, run: RunRecord) -> Outcome:
        self.calls.append(run)
        self.active.add(run.id)
        self.peak = max(self.peak, len(self.active))
        try:
            if self.behave is None:
                return Succeeded({"ran": run.id})
            return await self.behave(run)
        finally:
            self.active.discard(run.id)


class Gate:
    """A lane call that holds the lane's thread until opened, so the calls behind it queue up."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def __call__(self) -> str:
        self.entered.set()
        self.opened.wait(30)
        return "gate"

    async def held(self) -> None:
        await anyio.to_thread.run_sync(self.entered.wait, 30)
