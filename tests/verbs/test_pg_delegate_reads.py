"""Delegation's own SQL on both backends, end to end through the MCP client (docs/postgres.md, "SQL outside
`store/`"): a model child found by its call (`runs/resolve.py`), its progress read from its session
(`verbs/delegate.py`), a script chain handing its call to the successor (`runs/script_waits.py`), the child sessions
of `read thread:` (`spaces/threads.py`) and the boot reconciliation's orphan read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.console.runs import journal_tail
from mcp_harness.harness import Harness
from mcp_harness.runs.resolve import _child_for, pending_spawns, reconcile_at_boot  # pyright: ignore[reportPrivateUsage]
from mcp_harness.server import build_server
from mcp_harness.verbs.delegate import _activity  # pyright: ignore[reportPrivateUsage]
from tests.conftest import call
from tests.runs.test_script_waits_chain import CHAIN
from tests.runs.waitkit import script_runs
from tests.store.harnesskit import BACKENDS, harness_on

pytestmark = pytest.mark.anyio
RULES: list[dict[str, Any]] = [
    {"when": "Child task", "turns": [{"text": "first"}, {"text": "child done"}]},
    {"turns": [{"text": "default reply"}]},
]


@pytest.fixture(params=BACKENDS)
def delegating(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    harness = harness_on(request, tmp_path, request.param, RULES)
    try:
        yield harness
    finally:
        harness.close()


async def test_children_and_chains_on_both_backends(delegating: Harness) -> None:
    h = delegating
    async with Client(build_server(h), mode="legacy") as c:
        with anyio.fail_after(60):
            child = await call(c, "delegate", {"brief": "Child task: say hi", "title": "Kid"})
            chain = await call(c, "delegate", {"script": CHAIN, "title": "chain", "input": None})
        assert child["status"] == "succeeded" and chain["output"] == {"rounds": 2, "seen": 2}
        runs = script_runs(h)
        assert [r.parent_tool_call_id is None for r in runs] == [True, True, False]  # the call moved along
        tail = journal_tail(h, runs)  # the console's read across the chain's journals
        assert [(e["runId"], e["entry"]["kind"]) for e in tail] == [(r.id, "log") for r in runs]
        kid_session = h.runs.get(child["runId"]).session_id
        assert kid_session is not None
        parent = h.sessions.parent_of(kid_session)
        assert parent is not None
        thread = await call(c, "read", {"address": f"thread:{parent}", "format": "json"})
    (kid,) = thread["children"]
    assert kid["title"] == "Kid" and kid["runId"] == child["runId"] and kid["runStatus"] == "succeeded"
    assert _activity(h, kid_session) == (1, None)  # the brief, then two replies: one counts after the brief
    assert pending_spawns(h, parent) == set()
    call_id = h.runs.get(child["runId"]).parent_tool_call_id
    assert call_id is not None and _child_for(h, parent, call_id).id == child["runId"]  # pyright: ignore[reportOptionalMemberAccess]
    await reconcile_at_boot(h)  # nothing owed: every call is answered, and the orphan read finds none
    assert [e.type for e in h.sessions.events(parent)].count("tool_result") >= 3
