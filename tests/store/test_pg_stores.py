"""The first stores ported: agents, providers, secrets, triggers, instances and sessions (search aside) run unchanged
on SQLite and on PostgreSQL (every test runs on both backends through `any_db`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_harness.config import Settings
from mcp_harness.definition import AgentDefinition
from mcp_harness.errors import Conflict, NotFound
from mcp_harness.store import instances
from mcp_harness.store.agents import AgentStore
from mcp_harness.store.db import Database
from mcp_harness.store.port import Store
from mcp_harness.store.providers import ProviderRow, ProviderStore
from mcp_harness.store.runs import RunStore
from mcp_harness.store.secrets import SecretStore
from mcp_harness.store.sessions import NewSession, SessionStore
from mcp_harness.store.triggers import ACTIVITY_FEED, TriggerStore
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)


def definition(name: str) -> AgentDefinition:
    return AgentDefinition(name=name, system_prompt="Helps.", model_provider="scripted", model="scripted")


@pytest.fixture
def agents(any_db: Store, tmp_path: Path) -> AgentStore:
    store = AgentStore(any_db, tmp_path)
    store.ensure_account("acct", "owner")
    store.ensure_account("acct", "owner")  # INSERT OR IGNORE: a second call is a no-op
    return store


def test_agents_are_created_found_renamed_and_deleted(agents: AgentStore) -> None:
    first = agents.create("acct", definition("first"))
    agents.create("acct", definition("second"))
    with pytest.raises(Conflict, match="already exists"):
        agents.create("acct", definition("first"))
    assert agents.get(first.id).definition.name == "first"
    by_name, by_id = agents.find("acct", "second"), agents.find("acct", first.id)
    assert by_name is not None and by_name.definition.name == "second"
    assert by_id is not None and by_id.id == first.id
    renamed = agents.update(first.id, definition("renamed"))
    assert renamed.definition.name == "renamed"
    assert agents.get(first.id).definition.name == "renamed"  # the cache saw the write
    with pytest.raises(Conflict):
        agents.update(first.id, definition("second"))
    assert {a.definition.name for a in agents.list("acct")} == {"renamed", "second"}
    assert agents.count_sessions(first.id) == 0
    agents.delete(first.id)
    with pytest.raises(NotFound):
        agents.get(first.id)


def test_providers_insert_list_and_delete(any_db: Store) -> None:
    AgentStore(any_db, Path("/nowhere")).ensure_account("acct", "owner")
    store = ProviderStore(any_db)
    row = store.insert(ProviderRow(account_id="acct", name="p", type="openai", model="m", options={"ownsSecret": True}))
    assert (row.model, row.options) == ("m", {"ownsSecret": True})
    with pytest.raises(Conflict):
        store.insert(ProviderRow(account_id="acct", name="p", type="openai"))
    assert [p.name for p in store.list("acct")] == ["p"]
    assert store.delete("acct", "p") is True
    assert store.delete("acct", "p") is False
    assert store.get("acct", "p") is None


def test_secrets_seal_replace_and_refuse_another_kind(any_db: Store, tmp_path: Path) -> None:
    AgentStore(any_db, tmp_path).ensure_account("acct", "owner")
    store = SecretStore(any_db, Settings(data_dir=tmp_path))
    store.set("acct", "token", b"one", metadata={"label": "x"})
    first = store.set("acct", "token", b"two")
    assert store.get_value("acct", "token") == b"two"
    assert first.metadata == {}
    with pytest.raises(Conflict, match="already exists"):
        store.create("acct", "token", b"three")
    with pytest.raises(Conflict, match="not overwritten"):
        store.set("acct", "token", b"three", kind="webhook")
    assert store.update_metadata("acct", "token", {"label": "y"}).metadata == {"label": "y"}
    assert [s.name for s in store.list("acct", kind="secret")] == ["token"]
    # A second store on the same database checks the master key against the stored check row.
    assert SecretStore(any_db, Settings(data_dir=tmp_path)).get_value("acct", "token") == b"two"
    assert store.delete("acct", "token") is True
    with pytest.raises(NotFound):
        store.get_value("acct", "token")


def test_triggers_fire_once_per_dedupe_key_and_take_their_webhook_secret_along(any_db: Store, tmp_path: Path) -> None:
    agent = AgentStore(any_db, tmp_path)
    agent.ensure_account("acct", "owner")
    agent_id = agent.create("acct", definition("a")).id
    store = TriggerStore(any_db)
    saved = store.save(
        account_id="acct",
        agent_id=agent_id,
        name="nightly",
        enabled=True,
        source={"type": "schedule", "cron": "0 3 * * *"},
        prompt="go",
        continuation=None,
        next_due=lambda created, last: 1_000,
        now=10,
    )
    assert store.due(2_000, 10) == [saved.id]
    assert store.next_due() == 1_000
    assert store.index_entries(agent_id) == ([("nightly", True)], 1)
    firing_id = store.insert_firing(trigger=saved, dedupe_key="k1", activity={"a": 1}, summary="s", fired_at=5)
    assert firing_id is not None
    store.update_firing(firing_id, status="started", session_id=None, error=None)  # COALESCE(NULL, session_id)
    store.update_firing(firing_id, status="error", error="boom")
    found = store.firing(firing_id)
    assert found is not None and (found.status, found.session_id, found.error) == ("error", None, "boom")
    assert [f.id for f in store.recent_firings(saved.id)] == [firing_id]
    store.set_error(saved.id, "bad cron")
    assert [t.id for t in store.enabled_of_types("acct", ("schedule", "webhook"))] == [saved.id]
    assert [t.id for t in store.named(agent_id, "nightly")] == [t.id for t in store.of_agent(agent_id)]
    assert store.insert_firing(trigger=saved, dedupe_key="k1", activity={"a": 1}, summary="s", fired_at=6) is None
    store.mark_fired(saved.id, 7)
    store.mark_fired(saved.id, 3)  # the later time stays: MAX(a, b) on both backends
    store.advance(saved.id, fired_at=None, next_due_at=None, disable=True)
    current = store.get(saved.id)
    assert current is not None
    assert (current.last_fired_at, current.enabled, current.next_due_at) == (7, False, None)
    assert [f.dedupe_key for f in store.firings_of(saved.id)] == ["k1"]
    store.ensure_watermark("acct")
    store.ensure_watermark("acct")
    assert store.watermark("acct", ACTIVITY_FEED) == 0
    store.set_watermark("acct", ACTIVITY_FEED, 9)
    assert store.watermark("acct", ACTIVITY_FEED) == 9
    # The SQLite trigger that drops a webhook trigger's secret runs as a PL/pgSQL trigger on PostgreSQL.
    secrets = SecretStore(any_db, Settings(data_dir=tmp_path))
    secrets.set("acct", f"webhook:{saved.id}", b"hmac", kind="webhook")
    assert store.delete(saved.id) is True
    assert secrets.find("acct", f"webhook:{saved.id}") is None
    assert store.delete(saved.id) is False


# `Database` here: instances.py and RunStore are typed against SQLite's classes still (not the port's).
def test_instances_are_written_seen_alive_and_swept(any_db: Database) -> None:
    instances.here("live")
    try:
        with any_db.transaction() as conn:
            instances.touch(conn, ["live", "dead"])
            instances.touch(conn, ["live"])
        with any_db.reading() as conn:
            assert instances.alive(conn, ["live", "dead", "unknown"]) == {"live"}
            condition, args = instances.not_in("id", [])
            assert conn.execute(f"SELECT COUNT(*) FROM instances WHERE {condition}", args).fetchone()[0] == 2
        instances.gone(None, "dead")
        with any_db.transaction() as conn:
            assert "live" in instances.sweep(conn)
        with any_db.reading() as conn:
            assert sorted(r[0] for r in conn.execute("SELECT id FROM instances")) == ["live"]
    finally:
        instances.gone(None, "live")


def test_sessions_log_events_with_their_open_calls_and_large_values(any_db: Store, tmp_path: Path) -> None:
    agent = AgentStore(any_db, tmp_path)
    agent.ensure_account("acct", "owner")
    agent_id = agent.create("acct", definition("a")).id
    store = SessionStore(any_db)
    session = store.create("acct", agent_id, title="hello")
    big = "y" * 9000  # over the split threshold: the value moves to event_payloads and comes back whole
    call = {"type": "tool_call", "id": "c1", "name": "call", "input": {"tool": "web_fetch", "body": big}}
    store.append(session.id, {"type": "message", "role": "user", "content": "go"}, "user")
    store.append(session.id, call, "agent")
    assert [c.call_id for c in store.open_calls(session.id)] == ["c1"]
    assert store.touched(session.id) == {"web_fetch"}
    store.append_many(
        session.id,
        [
            ({"type": "tool_result", "toolCallId": "c1", "content": "ok"}, "system"),
            ({"type": "message", "role": "agent", "content": "done"}, "agent"),
        ],
    )
    events = store.events(session.id)
    assert [(e.seq, e.type) for e in events] == [(1, "message"), (2, "tool_call"), (3, "tool_result"), (4, "message")]
    assert events[1].payload["input"]["body"] == big
    assert store.answered_calls(session.id, ["c1"]) == {"c1"}
    store.set_plan(session.id, {"steps": ["a"]})
    assert store.get_plan(session.id) == {"steps": ["a"]}
    assert store.standing("acct", agent_id).kind == "standing"
    assert store.standing("acct", agent_id).id == store.standing("acct", agent_id).id
    assert store.chain_depth(session.id) == 0
    assert store.count("acct") == 2


# `Database` here: instances.py and RunStore are typed against SQLite's classes still (not the port's).
def test_sessions_are_made_in_batches_paged_and_chained_to_their_runs(any_db: Database, tmp_path: Path) -> None:
    agent = AgentStore(any_db, tmp_path)
    agent.ensure_account("acct", "owner")
    agent_id = agent.create("acct", definition("a")).id
    store = SessionStore(any_db)
    parent = store.create("acct", agent_id, title="parent")
    run = RunStore(any_db).enqueue(
        account_id="acct", title="child", origin="agent", agent_id=agent_id, input={"spec": {"output": {"a": 1}}}
    )
    brief = ({"type": "message", "role": "user", "content": "brief"}, "user")
    store.create_many(
        "acct",
        [
            NewSession(
                id="child", agent_id=agent_id, kind="child", parent_session_id=parent.id, run_id=run.id, events=[brief]
            ),
            NewSession(id="other", agent_id=agent_id, parent_session_id="child"),
        ],
    )
    assert store.parent_of("other") == "child" and store.parent_of("nothing") is None
    assert store.chain_depth("other") == 2
    assert (store.count_children(parent.id), store.live_children(parent.id)) == (1, 1)
    assert store.owed_output_schema("child") == {"a": 1} and store.owed_output_schema(parent.id) is None
    assert [e.type for e in store.events("child")] == ["message"]
    for n in range(3):
        store.append(parent.id, {"type": "message", "role": "user", "content": f"m{n}"}, "user")
    assert [e.seq for e in store.events(parent.id, last=2)] == [2, 3]
    assert [e.seq for e in store.events(parent.id, after=1)] == [2, 3]
    first = store.list("acct", limit=2)
    rest = store.list("acct", agent_id=agent_id, after=(first[-1].updated_at, first[-1].id))
    assert len({s.id for s in first + rest}) == store.count("acct", agent_id=agent_id) == 3
    assert store.live_run(parent.id) is None


def test_text_with_nul_is_kept_and_found_on_both_backends(any_db: Store, tmp_path: Path) -> None:
    agent = AgentStore(any_db, tmp_path)
    agent.ensure_account("acct", "owner")
    store = SessionStore(any_db)
    session = store.create("acct", agent.create("acct", definition("a")).id, title="t\x00t")
    store.append(session.id, {"type": "message", "role": "user", "content": "a\x00b"}, "user")
    store.append(session.id, {"type": "tool_call", "id": "c\x001", "name": "call", "input": {"tool": "x\x00"}}, "agent")
    # PostgreSQL's text holds no NUL: it is stored as U+FFFD there, and a lookup by the same key still matches.
    title = store.get(session.id).title
    assert title in ("t\x00t", "t\ufffdt")
    assert len(store.touched(session.id)) == 1 and len(store.open_calls(session.id)) == 1
    assert store.events(session.id)[0].payload["content"] == "a\x00b"  # the log itself is CBOR: kept as it was
    store.append(session.id, {"type": "tool_result", "toolCallId": "c\x001", "content": "ok"}, "system")
    assert store.open_calls(session.id) == []  # the result's key found the call's row
