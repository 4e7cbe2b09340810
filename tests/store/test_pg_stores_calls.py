"""The call-side stores on both backends (`any_db`): tools, mounted servers, touched callables, open calls, run
waits, moved-out payloads, the embeddings cache, attachments, IPFS blocks and the batched insert."""

from __future__ import annotations

import io
from array import array
from pathlib import Path

import cbor2
import pytest

from mcp_harness.callables.documents import ToolDocument
from mcp_harness.callables.upstream import ServerSpec
from mcp_harness.definition import AgentDefinition
from mcp_harness.errors import Conflict, StorageError
from mcp_harness.store import instances, open_calls, payloads, run_waits, search_vectors, touched
from mcp_harness.store.agents import AgentStore
from mcp_harness.store.attachments import AttachmentStore
from mcp_harness.store.batch import insert_rows
from mcp_harness.store.db import Database
from mcp_harness.store.ipfs_blocks import IpfsBlockStore, ipfs_upload
from mcp_harness.store.port import Store
from mcp_harness.store.runs import RunStore
from mcp_harness.store.sessions import SessionStore
from mcp_harness.store.tools import ToolStore
from mcp_harness.store.upstream_tools import UpstreamStore
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)


def tool(name: str, summary: str = "s", binding: str | None = None) -> ToolDocument:
    return ToolDocument(name=name, kind="builtin", summary=summary, description="d", input={}, binding=binding)


def a_session(db: Store, tmp_path: Path) -> tuple[str, str]:
    """An account, an agent and a session of it: (agent id, session id)."""
    agents = AgentStore(db, tmp_path)
    agents.ensure_account("acct", "owner")
    definition = AgentDefinition(name="a", system_prompt="Helps.", model_provider="scripted", model="scripted")
    agent_id = agents.create("acct", definition).id
    return agent_id, SessionStore(db).create("acct", agent_id, title="t").id


def test_tool_documents_are_upserted_listed_and_deleted(any_db: Store, tmp_path: Path) -> None:
    agent_id, _ = a_session(any_db, tmp_path)
    store = ToolStore(any_db)
    store.ensure_builtins(agent_id, [tool("read"), tool("write")])
    store.ensure_builtins(agent_id, [tool("read", "changed"), tool("write")])  # ON CONFLICT DO UPDATE
    assert [(t.name, t.document.summary) for t in store.list(agent_id)] == [("read", "changed"), ("write", "s")]
    lam = ToolDocument(name="double", kind="lambda", summary="x2", description="d", input={}, source="x*2")
    cid = store.save_lambda(agent_id, lam)
    found = store.get(agent_id, "double")
    assert found is not None and (found.cid, found.enabled, found.kind) == (cid, True, "lambda")
    assert [t.name for t in store.list(agent_id)] == ["double", "read", "write"]  # the cache saw the write
    assert store.delete_lambda(agent_id, "double") is True
    assert store.delete_lambda(agent_id, "read") is False  # a builtin is not a lambda
    assert store.get(agent_id, "double") is None


def test_mounted_servers_and_their_tools_sync_to_exactly_what_the_server_lists(any_db: Store) -> None:
    store = UpstreamStore(any_db)
    store.add_server(ServerSpec(name="files", command=("files-server",)))
    with pytest.raises(Conflict, match="already mounted"):
        store.add_server(ServerSpec(name="files", command=("other",)))
    assert [s.name for s in store.list_servers()] == ["files"]
    first = store.sync_tools(
        "files", [tool("files.a", binding="mcp://files/a"), tool("files.b", binding="mcp://files/b")]
    )
    assert (first.added, first.changed, first.removed) == (("files.a", "files.b"), (), ())
    again = store.sync_tools("files", [tool("files.a", "new", binding="mcp://files/a")])
    assert (again.added, again.changed, again.removed, again.unchanged) == ((), ("files.a",), ("files.b",), 0)
    assert [t.document.summary for t in store.tools(["files"])] == ["new"]
    assert store.tools(["other"]) == [] and store.has_tools("files")
    found = store.tool("files", "files.a")  # one call's lookup: the same kept rows, by server and name
    assert found is not None and found.document.summary == "new"
    assert store.tool("files", "files.b") is None and store.tool("other", "files.a") is None
    assert store.remove_server("files") is True
    assert store.remove_server("files") is False
    assert not store.has_tools("files") and store.tool("files", "files.a") is None


# `Database` here: instances.py and RunStore are typed against SQLite's classes still (not the port's).
def test_appends_track_touched_callables_and_open_calls(any_db: Database, tmp_path: Path) -> None:
    _, session_id = a_session(any_db, tmp_path)
    calls = [
        ({"type": "tool_call", "id": "c1", "name": "call", "input": {"tool": "web_fetch"}}, "agent", 1),
        ({"type": "tool_call", "id": "c2", "name": "read", "input": {"address": "~/tools/notes/"}}, "agent", 2),
        ({"type": "tool_call", "id": "c3", "name": "call", "input": {"tool": "by_user"}}, "user", 3),
        ({"type": "tool_result", "toolCallId": "c2", "content": "ok"}, "system", 4),
    ]
    with any_db.transaction() as conn:
        touched.track(conn, session_id, [(p, a) for p, a, _ in calls])
        touched.track(conn, session_id, [(p, a) for p, a, _ in calls])  # INSERT OR IGNORE: no duplicate
        open_calls.track(conn, session_id, calls, "gone-instance", 5)
        open_calls.track(conn, session_id, calls[:1], "gone-instance", 6)  # the same call again: one row
    with any_db.reading() as conn:
        assert touched.names(conn, session_id) == {"web_fetch", "notes"}
        assert [c.call_id for c in open_calls.in_session(conn, session_id)] == ["c1", "c3"]
        assert open_calls.among(conn, session_id, ["c1", "c2", "c9"]) == {"c1"}
        assert open_calls.among(conn, session_id, []) == set()
        assert [c.call_id for c in open_calls.orphaned(conn, [])] == ["c1", "c3"]
        assert open_calls.orphaned(conn, ["gone-instance"]) == []
        assert instances.alive(conn, ["gone-instance"]) == set()  # recorded by the track, not this process


# `Database` here: instances.py is typed against SQLite's classes still (not the port's).
def test_open_calls_of_several_sessions_close_together_and_only_their_own(any_db: Database, tmp_path: Path) -> None:
    _, first = a_session(any_db, tmp_path)
    sessions = SessionStore(any_db)
    second = sessions.create("acct", sessions.get(first).agent_id, title="t2").id

    def call(seq: int) -> tuple[dict[str, object], str, int]:
        return {"type": "tool_call", "id": f"c{seq}", "name": "delegate", "input": {}}, "agent", seq

    def result(call_id: str, seq: int) -> tuple[dict[str, object], str, int]:
        return {"type": "tool_result", "toolCallId": call_id, "output": {}}, "system", seq

    with any_db.transaction() as conn:
        open_calls.track_across(conn, [(first, [call(1), call(2)]), (second, [call(1), call(2)])], "i", 5)
    with any_db.transaction() as conn:  # one delete for both sessions: each loses only its own c1
        closed = [(first, [result("c1", 3)]), (second, [result("c1", 3), result("c2", 4)])]
        open_calls.track_across(conn, closed, "i", 6)
    with any_db.reading() as conn:
        assert [c.call_id for c in open_calls.in_session(conn, first)] == ["c2"]
        assert open_calls.in_session(conn, second) == []


# `Database` here: instances.py and RunStore are typed against SQLite's classes still (not the port's).
def test_run_waits_are_replaced_and_found_by_signal_and_activity(any_db: Database, tmp_path: Path) -> None:
    agent_id, session_id = a_session(any_db, tmp_path)
    run = RunStore(any_db).enqueue(
        account_id="acct", title="t", origin="user", agent_id=agent_id, session_id=session_id
    )
    waits = [
        run_waits.WaitRow(run.id, "w1", 3, "k1", {"signal": "go"}, timeout_at=99),
        run_waits.WaitRow(run.id, "w2", 4, "k2", {}),
        run_waits.WaitRow(run.id, "w3", 5, "k3", {"type": "comment"}),
    ]
    with any_db.transaction() as conn:
        run_waits.replace(conn, run.id, "acct", waits)
        run_waits.replace(conn, run.id, "acct", waits)  # exactly these, not twice
        conn.execute("UPDATE runs SET status = 'waiting' WHERE id = ?", (run.id,))
    with any_db.reading() as conn:
        assert run_waits.of_run(conn, run.id) == waits
        assert [w.wait_id for w in run_waits.for_signal(conn, "acct", None, "go")] == ["w1", "w2"]
        assert [w.wait_id for w in run_waits.for_signal(conn, "acct", run.id, "stop", agent_id)] == ["w2"]
        assert [w.wait_id for w in run_waits.for_activity(conn)] == ["w3"]
    with any_db.transaction() as conn:
        run_waits.clear(conn, run.id)
    with any_db.reading() as conn:
        assert run_waits.of_run(conn, run.id) == []


def test_moved_out_values_are_stored_once_resolved_and_swept(any_db: Store, tmp_path: Path) -> None:
    _, session_id = a_session(any_db, tmp_path)
    event = {"type": "tool_result", "toolCallId": "c", "content": "z" * 9000}
    split = payloads.split(event, cbor2.dumps(event))
    assert split.parts
    with any_db.transaction() as conn:
        conn.execute(
            "INSERT INTO session_events (session_id, seq, id, type, actor, created_at, event_cbor) "
            "VALUES (?, 1, 'e1', 'tool_result', 'system', 1, ?)",
            (session_id, split.blob),
        )
        payloads.store(conn, session_id, 1, split.parts, 1)
        payloads.store(conn, session_id, 1, split.parts, 2)  # the same value again: still one row
        assert payloads.sweep(conn) == (0, 0)
    assert payloads.Resolver(any_db).loads(split.blob) == event
    with any_db.transaction() as conn:
        conn.execute("DELETE FROM session_events WHERE session_id = ?", (session_id,))
        assert payloads.sweep(conn)[0] == 1
    with pytest.raises(StorageError, match="missing"):
        payloads.Resolver(any_db).loads(split.blob)


def test_the_embeddings_cache_replaces_marks_used_and_prunes_the_oldest(any_db: Store) -> None:
    one, two = search_vectors.digest("one"), search_vectors.digest("two")
    with any_db.transaction() as conn:
        search_vectors.store(conn, "m", {one: search_vectors.unit([1.0, 0.0]), two: search_vectors.unit([0.0, 2.0])})
        search_vectors.store(conn, "m", {one: search_vectors.unit([0.0, 1.0])})  # ON CONFLICT DO UPDATE
        found = search_vectors.lookup(conn, "m", [one, two, one])
        assert found == {one: array("f", [0.0, 1.0]), two: array("f", [0.0, 1.0])}
        assert search_vectors.lookup(conn, "other", [one]) == {}
        conn.execute("UPDATE search_vectors SET used_at = 0 WHERE digest = ?", (two,))
        search_vectors.prune(conn, 1)
        assert list(search_vectors.lookup(conn, "m", [one, two])) == [one]


def test_attachments_are_kept_once_per_session_and_swept_when_no_session_holds_them(
    any_db: Store, tmp_path: Path
) -> None:
    _, session_id = a_session(any_db, tmp_path)
    store = AttachmentStore(any_db, tmp_path / "attachments")
    first = store.add(session_id, "notes.txt", "text/plain", io.BytesIO(b"hello"))
    again = store.add(session_id, "other.txt", None, io.BytesIO(b"hello"))
    assert again == first and store.count(session_id) == 1
    assert [r.name for r in store.list(session_id)] == ["notes.txt"]
    assert store.get(session_id, first.id) == first and store.read_bytes(first) == b"hello"
    assert store.sweep() == (0, 0)
    with any_db.transaction() as conn:
        conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
    assert store.sweep() == (1, 5)


def test_ipfs_blocks_are_indexed_once_and_read_back_checked(any_db: Store, tmp_path: Path) -> None:
    store = IpfsBlockStore(any_db, tmp_path / "ipfs")
    imported = ipfs_upload(store, b"a file")
    ipfs_upload(store, b"a file")  # INSERT OR IGNORE: indexed once
    assert store.has(imported.cid) and store.get(imported.cid) == b"a file"
    assert store.get("bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy") is None
    with any_db.reading() as conn:
        assert conn.execute("SELECT COUNT(*) FROM ipfs_blocks").fetchone()[0] == 1


def test_an_ipfs_store_needs_a_root_where_the_database_has_no_file(any_db: Store) -> None:
    if hasattr(any_db, "path"):
        assert IpfsBlockStore(any_db).root.name == "ipfs"  # beside SQLite's file
    else:
        with pytest.raises(StorageError, match="give IpfsBlockStore its blocks' root"):
            IpfsBlockStore(any_db)


def test_batched_inserts_keep_row_order_across_statements(any_db: Store) -> None:
    rows = [(f"acct{i:03}", "owner", i) for i in range(250)]  # three statements of at most CHUNK rows
    with any_db.transaction() as conn:
        insert_rows(conn, "INSERT INTO accounts (id, name, created_at) VALUES", "(?, ?, ?)", rows)
    with any_db.reading() as conn:
        assert [tuple(r) for r in conn.execute("SELECT id, name, created_at FROM accounts ORDER BY id")] == rows
