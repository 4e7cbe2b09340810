"""A reply's children written together (`ChildBatch`, `SessionStore.create_many`, `RunStore.enqueue_many`): each
child is checked as it is added — a refused one writes nothing — and the rest land in one transaction exactly as one
`spawn_child` each would have written them: session, brief as event 1, queued run one level down, the parent's calls
logged in order and open. Real SQLite."""

from __future__ import annotations

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from mcp_harness.verbs.delegate import MAX_CHILDREN_PER_RUN, ChildBatch


def test_a_batch_writes_every_child_it_accepted_and_nothing_for_a_refused_one(harness: Harness) -> None:
    h = harness
    agent = h.agent()
    parent_session = h.sessions.create(h.account_id, agent.id).id
    parent = h.runs.enqueue(
        account_id=h.account_id, title="parent", origin="agent", agent_id=agent.id, session_id=parent_session
    )
    batch = ChildBatch(h, agent_id=agent.id, parent_session_id=parent_session, parent_run=parent)
    spawned = [batch.add(f"call-{i}", {"input": f"Leaf {i}"}) for i in range(MAX_CHILDREN_PER_RUN)]
    with pytest.raises(BadRequest, match=f"already spawned {MAX_CHILDREN_PER_RUN} sub-sessions"):
        batch.add("call-extra", {"input": "one too many"})  # counted with the ones not written yet
    logged = [({"type": "tool_call", "id": f"call-{i}", "name": "delegate", "input": {}}, "agent") for i in range(10)]
    batch.write(parent_session, logged)  # pyright: ignore[reportArgumentType]

    children = h.runs.children(parent.id)
    assert sorted(c.id for c in children) == sorted(s.run_id for s in spawned)
    assert {(c.status, c.depth, c.root_run_id, c.max_attempts) for c in children} == {("queued", 1, parent.id, 3)}
    by_call = {c.parent_tool_call_id: c for c in children}
    for i, s in enumerate(spawned):
        child = by_call[f"call-{i}"]
        assert child.session_id == s.session_id and child.title == f"Leaf {i}"
        assert child.input["spec"] == {"input": f"Leaf {i}"} and child.input["parentToolCallId"] == f"call-{i}"
        assert s.session_id is not None
        session = h.sessions.get(s.session_id)
        assert (session.kind, session.parent_session_id, session.run_id) == ("child", parent_session, child.id)
        [brief] = h.sessions.events(s.session_id)
        assert (brief.seq, brief.actor, brief.payload["content"]) == (1, "agent", f"Leaf {i}")
    assert [e.payload["id"] for e in h.sessions.events(parent_session)] == [f"call-{i}" for i in range(10)]
    assert [c.call_id for c in h.sessions.open_calls(parent_session)] == [f"call-{i}" for i in range(10)]
    assert h.sessions.parent_of(spawned[0].session_id or "") == parent_session

    refused = ChildBatch(h, agent_id=agent.id, parent_session_id=parent_session, parent_run=parent)
    with pytest.raises(BadRequest, match="already spawned"):
        refused.add("call-late", {"input": "late"})  # the ten written count now
    refused.write()
    assert len(h.runs.children(parent.id)) == MAX_CHILDREN_PER_RUN


def test_enqueue_many_keeps_an_id_already_queued_and_refuses_a_blank_title(harness: Harness) -> None:
    from mcp_harness.store.runs import NewRun

    h = harness
    first = h.runs.enqueue(account_id=h.account_id, title="kept", origin="agent")
    h.runs.enqueue_many([NewRun(id=first.id, account_id=h.account_id, title="other", origin="agent")])
    assert h.runs.get(first.id).title == "kept"
    with pytest.raises(BadRequest, match="non-empty title"):
        h.runs.enqueue_many([NewRun(id="x", account_id=h.account_id, title="  ", origin="agent")])
    assert h.runs.find("x") is None
