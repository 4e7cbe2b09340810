"""Keyword search (store/hm_search.py, memory_search.py, search_queries.py) and gc's unindexing (retention.py) give
the same hits on both backends: FTS5 on SQLite, a tsvector under GIN on PostgreSQL (store/keyword_index.py).

Orderings are asserted only where bm25 and ts_rank_cd agree (titles and profiles first, more occurrences first, a
path hit before a text hit); scores never.
"""

from __future__ import annotations

from pathlib import Path

from mcp_harness.callables.search_text import parse_query
from mcp_harness.definition import AgentDefinition
from mcp_harness.hypermedia.node import Node
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store import hm_search, memory_search, search_queries
from mcp_harness.store.agents import AgentStore
from mcp_harness.store.db import Database
from mcp_harness.store.dialect import backend
from mcp_harness.store.keyword_index import MAX_TSVECTOR_BYTES, tsquery, words
from mcp_harness.store.retention import Retention, collect
from mcp_harness.store.sessions import SessionStore
from tests.hypermedia.activity_kit import comment, create
from tests.store.pgkit import any_db_fixture  # noqa: F401  (the any_db fixture)

KEY = KeyPair.from_seed(bytes(range(32)))
OTHER = KeyPair.from_seed(bytes(range(1, 33)))
ALL = ("title", "profile", "document", "comment")
_INSERT = hm_search._insert  # pyright: ignore[reportPrivateUsage]  (the write `track` makes per indexed row)


def _match(text: str) -> str:
    query = parse_query(text)
    assert query is not None
    return query.match


def _hm(db: Database, text: str, *, account: str | None = None) -> list[tuple[str, str]]:
    with db.reading() as conn:
        return [(h.kind, h.text) for h in search_queries.hm_keyword(conn, _match(text), ALL, account, 20)]


def _document(db: Database, path: str, *, live: bool, title: str, blocks: list[str]) -> None:
    """A document's index rows as `hm_search` writes them from its state, with the `hm_documents` row that says
    whether it is live (its materialized state is `hm_documents`' business, tested apart)."""
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO hm_documents (space, path, parent, ref, live, heads, pending, state) "
            "VALUES (?, ?, NULL, ?, ?, ?, 0, NULL)",
            (KEY.account_id, path, f"ref{path}", int(live), f"heads{path}"),
        )
        _INSERT(conn, title, "title", KEY.account_id, KEY.account_id, path, "", "", 1, f"ref{path}")
        for i, text in enumerate(blocks):
            _INSERT(conn, text, "document", KEY.account_id, KEY.account_id, path, f"b{i}", "", 1, f"ref{path}")


def test_words_and_queries_fold_and_split_as_unicode61_does() -> None:
    assert words("Über naïve example.com v1.5 foo_bar ÉCOLE") == "uber naive example com v1 5 foo bar ecole"
    assert tsquery(_match('"naïve Example" über')) == "'naive' <-> 'example' & 'uber':*"
    assert tsquery(_match("cafe* x")) == "'cafe':* & 'x':*"
    assert tsquery('"--"') is None
    # A tsvector holds at most 1 MB: the words that fit, from the start (each distinct one costs its bytes and more).
    many = words(" ".join(f"w{i:07d}" for i in range(200_000)))
    assert many.startswith("w0000000 w0000001") and len(many) < MAX_TSVECTOR_BYTES


def test_documents_profiles_and_comments_match_alike(any_db: Database) -> None:
    _document(any_db, "/notes", live=True, title="Café Notes", blocks=["Über naïve example.com release 1.5"])
    _document(any_db, "/birds", live=True, title="Birds", blocks=["heron heron heron", "heron egret kingfisher"])
    _document(any_db, "/gone", live=False, title="Hidden notes", blocks=["über hidden"])
    node = Node(any_db)
    node.publish([node.profile_blob(KEY, "Alice Über", description="watches herons")])
    node.publish([node.profile_blob(OTHER, "Bob", description="bakes bread")])

    assert _hm(any_db, "ÜBER") == [("profile", "Alice Über\nwatches herons"), ("document", _notes_block())]
    assert _hm(any_db, "cafe") == [("title", "Café Notes")]
    assert _hm(any_db, "example") == _hm(any_db, "com") == [("document", _notes_block())]
    assert _hm(any_db, "exam") == [("document", _notes_block())]  # the last word typed is a prefix
    assert _hm(any_db, '"naive example"') == [("document", _notes_block())]
    assert _hm(any_db, '"example naive"') == []  # a phrase keeps its order
    assert _hm(any_db, "release über") == [("document", _notes_block())]  # every word, in any order
    assert _hm(any_db, "release herons") == []
    assert _hm(any_db, "hidden") == []  # a document that is not live
    assert _hm(any_db, "bread", account=KEY.account_id) == []
    assert _hm(any_db, "bread", account=OTHER.account_id) == [("profile", "Bob\nbakes bread")]
    # Profiles and titles first, then the block with more occurrences.
    assert _hm(any_db, "heron") == [
        ("profile", "Alice Über\nwatches herons"),
        ("document", "heron heron heron"),
        ("document", "heron egret kingfisher"),
    ]
    # A newer profile replaces the indexed one: its old words stop matching.
    node.publish([node.profile_blob(KEY, "Alice Über", description="now paints boats")])
    assert _hm(any_db, "watches") == []
    assert _hm(any_db, "boats") == [("profile", "Alice Über\nnow paints boats")]
    with any_db.reading() as conn:
        assert search_queries.titles(conn, [(KEY.account_id, "/notes")]) == {(KEY.account_id, "/notes"): "Café Notes"}
        assert search_queries.profile_names(conn, [KEY.account_id]) == {KEY.account_id: "Alice Über"}
        newest = search_queries.hm_candidates(conn, ("profile",), None, 5)
    assert sorted(h.text for h in newest) == ["Alice Über\nnow paints boats", "Bob\nbakes bread"]


def test_published_documents_and_comments_are_indexed_and_a_deleted_document_is_not(any_db: Database) -> None:
    node = Node(any_db)
    create(node, KEY, "/trip", "Kingfisher sighting at dawn", name="Trip Log")
    comment(node, OTHER, KEY.account_id, "/trip", "a lovely kingfisher")
    assert sorted(_hm(any_db, "kingfisher")) == [
        ("comment", "a lovely kingfisher"),
        ("document", "Kingfisher sighting at dawn"),
    ]
    assert _hm(any_db, "trip") == [("title", "Trip Log")]
    node.publish([node.tombstone(KEY, node.document(KEY.account_id, "/trip"))])
    assert _hm(any_db, "dawn") == _hm(any_db, "trip") == []
    assert _hm(any_db, "kingfisher") == [("comment", "a lovely kingfisher")]


def _notes_block() -> str:
    return "Über naïve example.com release 1.5"


def _memory(db: Database, agent_id: str, root: Path, text: str) -> list[str]:
    with db.reading() as conn:
        known = memory_search.indexed(conn, agent_id)
    found = memory_search.changes(str(root), known)
    with db.transaction() as conn:
        memory_search.apply(conn, agent_id, found)
        return [h.path for h in search_queries.memory_keyword(conn, agent_id, _match(text), 10)]


def test_memory_files_match_alike_and_leave_the_index_when_they_go(any_db: Database, tmp_path: Path) -> None:
    agents = AgentStore(any_db, tmp_path / "state")
    agents.ensure_account("acct", "owner")
    agent_id = agents.create(
        "acct", AgentDefinition(name="a", system_prompt="s", model_provider="scripted", model="scripted")
    ).id
    root = tmp_path / "memory"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "herons.md").write_text("Herons wade in the Café shallows\n")
    (root / "todo.txt").write_text("buy bread, then watch the herons\n")
    (root / "data.bin").write_bytes(b"\x00\x01binary")
    (root / "big.txt").write_text(" ".join(f"w{i:07d}" for i in range(100_000)))  # more than a tsvector holds

    assert _memory(any_db, agent_id, root, "herons") == ["notes/herons.md", "todo.txt"]  # the path hit first
    assert _memory(any_db, agent_id, root, "cafe shallow") == ["notes/herons.md"]
    assert _memory(any_db, agent_id, root, "data") == ["data.bin"]  # binary: by its path alone
    assert _memory(any_db, agent_id, root, "w0000001") == ["big.txt"]
    (root / "todo.txt").unlink()
    (root / "notes" / "herons.md").write_text("Egrets now\n")
    assert _memory(any_db, agent_id, root, "bread") == []
    assert _memory(any_db, agent_id, root, "shallows") == []
    assert _memory(any_db, agent_id, root, "egrets") == ["notes/herons.md"]
    with any_db.reading() as conn:
        candidates = search_queries.memory_candidates(conn, agent_id, 10)
    assert {h.path: h.text for h in candidates if h.path != "big.txt"} == {
        "notes/herons.md": "Egrets now\n",
        "data.bin": "",
    }
    agents.delete(agent_id)  # the agent's index rows go with it (a trigger; on PostgreSQL the text rows cascade)
    with any_db.reading() as conn:
        assert memory_search.indexed(conn, agent_id) == {}
        assert conn.execute("SELECT COUNT(*) FROM memory_search_text").fetchone()[0] == 0


def test_gc_takes_pruned_messages_out_of_the_thread_index(any_db: Database, tmp_path: Path) -> None:
    agents = AgentStore(any_db, tmp_path / "state")
    agents.ensure_account("acct", "owner")
    agent_id = agents.create(
        "acct", AgentDefinition(name="a", system_prompt="s", model_provider="scripted", model="scripted")
    ).id
    store = SessionStore(any_db)
    session = store.create("acct", agent_id, title="t")
    texts = ["zebra 100% old_one", "zebra second", "zebra kept three", "zebra kept four"]
    for text in texts:
        store.append(session.id, {"type": "message", "role": "user", "content": text}, "user")

    report = collect(any_db, Retention(max_age_ms=0, max_bytes=None, keep_last=2), now=1 << 50)
    assert report.pruned.events == 2
    assert report.file_bytes_before > 0 and report.file_bytes_after > 0
    with any_db.reading() as conn:
        postgres = backend(conn) == "postgres"
    assert report.vacuum == ("none" if postgres else "full")  # autovacuum's job there
    with any_db.reading() as conn:
        left = [str(r[0]) for r in conn.execute("SELECT content FROM message_search ORDER BY content")]
    assert left == ["zebra kept four", "zebra kept three"]
    assert store.search("acct", "100% old_one", agent_id=None, limit=5) == []
    assert [s.id for s, _ in store.search("acct", "kept four", agent_id=None, limit=5)] == [session.id]
