"""Runs started together (`AgentExecutor._starts`) read their state once for the batch (`StartReads`), and each
first request is the one a start alone builds: the same log, plan block and promoted tools; a session with a call a
restart interrupted is reconciled first and read after that write. Replies recorded together check every run's
lease, not only the first caller's. Real SQLite and real PostgreSQL for the
requests; the statement count on SQLite, whose connection can be traced."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.harness import Harness
from mcp_harness.models.wire import ModelRequest, ModelResponse, ToolCall, Usage
from mcp_harness.runs.agent import AgentExecutor, Turn
from mcp_harness.runs.records import RunRecord
from mcp_harness.runs.start_reads import StartReads
from mcp_harness.store.db import Database
from mcp_harness.store.run_leases import LeaseLost, executing
from tests.conftest import scripted_harness
from tests.store.pgkit import store_backend_fixture  # noqa: F401  (the store_backend fixture)

RULES: list[dict[str, Any]] = [{"turns": [{"text": "done"}]}]
READS = ("FROM runs", "FROM open_calls", "FROM session_events", "FROM session_touched", "plan_cbor FROM sessions")
"""What a start read one run at a time (its status; its session's open calls, log, touched callables, plan)."""


def _running(h: Harness, titles: list[str], owner: str = "me") -> list[RunRecord]:
    """A session per title with the user's message, and its run claimed and running."""
    agent = h.agent()
    queued = []
    for title in titles:
        session = h.sessions.create(h.account_id, agent.id, title=title)
        h.sessions.append(session.id, {"type": "message", "role": "user", "content": f"Please {title}"}, "user")
        queued.append(
            h.runs.enqueue(
                account_id=h.account_id, title=title, origin="user", agent_id=agent.id, session_id=session.id
            ).id
        )
    h.runs.claim_batch(owner, {"agent": len(titles)}, lease_ms=60_000, exclude=set())
    running = [h.runs.mark_running(run_id, owner) for run_id in queued]
    assert all(r is not None for r in running)
    return [r for r in running if r is not None]


def _shaped(runs: list[RunRecord], h: Harness) -> None:
    """One session with a plan, one that touched a tool, one with a call a restart left open."""
    planned, touched, interrupted = (r.session_id for r in runs[:3])
    assert planned is not None and touched is not None and interrupted is not None
    h.sessions.set_plan(planned, {"steps": [{"id": "s1", "label": "look", "status": "pending"}]})
    h.sessions.append(
        touched, {"type": "tool_call", "id": "t1", "name": "read", "input": {"address": "~/tools/search"}}, "agent"
    )
    h.sessions.append(touched, {"type": "tool_result", "toolCallId": "t1", "name": "read", "output": {}}, "system")
    h.sessions.append(
        interrupted, {"type": "tool_call", "id": "c1", "name": "read", "input": {"address": "~/"}}, "agent"
    )


def _messages(request: Any) -> list[tuple[str, str]]:
    return [(m.role, str(m.content)) for m in request.messages]


@pytest.mark.usefixtures("store_backend")
def test_runs_started_together_build_the_requests_each_start_alone_builds(tmp_path: Any) -> None:
    h = scripted_harness(tmp_path, RULES)
    try:
        runs = _running(h, ["plan ahead", "use a tool", "resume", "plain"])
        _shaped(runs, h)
        executor = AgentExecutor(h)
        started = executor._starts(runs)  # pyright: ignore[reportPrivateUsage]
        for run, one in zip(runs, started, strict=True):
            assert isinstance(one, tuple), one
            turn, _, first = one
            assert not isinstance(first, Exception)
            alone = executor._request(turn)  # pyright: ignore[reportPrivateUsage]  (reads the store itself)
            assert _messages(first) == _messages(alone) and first.tools == alone.tools and first.system == alone.system
            assert turn.depth == 0 and turn.run.id == run.id
        plan_request, tool_request, resumed = (s[2] for s in started[:3] if isinstance(s, tuple))
        assert isinstance(plan_request, ModelRequest) and isinstance(tool_request, ModelRequest)
        assert isinstance(resumed, ModelRequest)
        assert any("look" in text for _, text in _messages(plan_request))  # the plan block
        assert "search" in {t.name for t in tool_request.tools}  # the touched tool, promoted
        assert any("interrupted" in text.lower() for _, text in _messages(resumed))  # answered, then read
        assert h.sessions.open_calls(runs[2].session_id or "") == []
        # The roots an MCP client's delegate started, read for many runs at once as for one.
        client = h.runs.enqueue(account_id=h.account_id, title="client's", origin="user", parent_tool_call_id="c9")
        among = [client.id, runs[0].id, "no-such-run"]
        assert h.runs.started_by_client_among(among) == {r for r in among if h.runs.started_by_client(r)} == {client.id}
    finally:
        h.close()


def test_a_batch_of_starts_reads_each_kind_once_however_many_runs(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_HARNESS_STORE_URL", raising=False)  # SQLite: its connection can be traced
    h = scripted_harness(tmp_path, RULES)
    try:
        assert isinstance(h.db, Database)
        counts = []
        for n in (1, 8):
            runs = _running(h, [f"task {n}.{i}" for i in range(n)])
            statements: list[str] = []
            h.db._conn.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]
            try:
                started = AgentExecutor(h)._starts(runs)  # pyright: ignore[reportPrivateUsage]
            finally:
                h.db._conn.set_trace_callback(None)  # pyright: ignore[reportPrivateUsage]
            assert all(isinstance(s, tuple) for s in started)
            counts.append({kind: sum(kind in s for s in statements) for kind in READS})
        assert counts[1] == counts[0] == dict.fromkeys(READS, 1), counts  # eight runs' starts read as one's
    finally:
        h.close()


def test_start_reads_say_which_sessions_their_starts_must_read_themselves(tmp_path: Any) -> None:
    h = scripted_harness(tmp_path, RULES)
    try:
        runs = _running(h, ["plan ahead", "use a tool", "resume"])
        _shaped(runs, h)
        reads = StartReads.of(h, runs)
        planned, touched, interrupted = (r.session_id or "" for r in runs)
        assert reads.open == {interrupted} and reads.of_session(interrupted) is None
        assert {r.id for r in runs} == set(reads.states) and {s for s, _ in reads.states.values()} == {"running"}
        plan = reads.of_session(planned)
        assert plan is not None and plan.plan == h.sessions.get_plan(planned) and plan.touched == set()
        tool = reads.of_session(touched)
        assert tool is not None and tool.touched == {"search"} and tool.events == h.sessions.events(touched)
        assert reads.client_roots == set()  # each run is its own root
    finally:
        h.close()


def test_a_batch_of_replies_checks_the_lease_of_every_run_in_it_not_only_its_first(tmp_path: Any) -> None:
    # A lane batch runs in its first caller's context, where only that caller's run is known to be executing: the
    # replies of the others must still be refused when another engine took their run over.
    h = scripted_harness(tmp_path, RULES)
    try:
        runs = _running(h, ["first", "second", "third"], owner=h.engine.owner)
        with h.db.transaction() as conn:
            conn.execute("UPDATE runs SET lease_owner = 'another-engine' WHERE id = ?", (runs[1].id,))
        agent = h.agent()
        turns = [Turn(run=run, agent=agent, spec={}) for run in runs]
        reply = ModelResponse(text="done", tool_calls=(), usage=Usage(input=1, output=1))
        before = {run.id: len(h.sessions.events(run.session_id or "")) for run in runs}
        with executing(runs[0].id, h.engine.owner), pytest.raises(LeaseLost, match=runs[1].id):
            AgentExecutor(h)._record_replies([(turn, reply) for turn in turns])  # pyright: ignore[reportPrivateUsage]
        assert {run.id: len(h.sessions.events(run.session_id or "")) for run in runs} == before  # none of them
    finally:
        h.close()


def test_a_batch_of_delegations_checks_the_lease_of_every_run_in_it(tmp_path: Any) -> None:
    h = scripted_harness(tmp_path, RULES)
    try:
        runs = _running(h, ["first", "second"], owner=h.engine.owner)
        with h.db.transaction() as conn:
            conn.execute("UPDATE runs SET lease_owner = 'another-engine' WHERE id = ?", (runs[1].id,))
        agent = h.agent()
        call = ToolCall(id="d1", name="delegate", arguments={"brief": "a leaf"})
        groups: list[Any] = [(Turn(run=run, agent=agent, spec={}), [call], []) for run in runs]
        with executing(runs[0].id, h.engine.owner), pytest.raises(LeaseLost, match=runs[1].id):
            AgentExecutor(h)._delegate_groups(groups)  # pyright: ignore[reportPrivateUsage]
        assert [h.runs.children(run.id) for run in runs] == [[], []]  # no child spawned for either
    finally:
        h.close()
