"""The materialized state of hypermedia documents (`hm_documents`, migration m010) against a full replay.

Whatever the node stores for a resource's winning Ref must be exactly what replaying every change its heads reach
gives (`Node.state`, the reference path): after seeded-random runs of edits, moves, deletes, redirects, re-creates,
batched versions, forks and merges, Refs rolled back, out-of-order ingests and RGA refs; after the m010 backfill of
a database whose blobs were stored before the table existed; and in the directory listing's contents and order.
"""

from __future__ import annotations

import json
import random
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.errors import NotFound
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.materialized import Snapshot
from mcp_harness.hypermedia.node import Document, Node
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.db import Database
from mcp_harness.store.hypermedia import RefRow

KEY = KeyPair.from_seed(bytes(range(32)))
SPACE = KEY.account_id


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "harness.db")
    yield database
    database.close()


def _resources(db: Database) -> list[tuple[str, str]]:
    with db.reading() as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT DISTINCT space, path FROM hm_refs ORDER BY space, path")]


def assert_materialized_equals_replay(db: Database) -> int:
    """Every live resource's stored state equals a replay on a node with nothing cached; returns how many."""
    node, fresh = Node(db), Node(db)
    checked = 0
    for space, path in _resources(db):
        ref = node.ref(space, path)
        assert ref is not None
        if ref.is_tombstone or ref.is_redirect:
            continue
        stored = node.store.materialized(ref)
        assert stored is not None, f"{path} has no materialized state"
        snapshot = Snapshot.from_bytes(stored)
        assert snapshot is not None
        materialized, replayed = snapshot.state(), fresh.state(ref.heads)
        assert materialized == replayed, path
        as_json = [json.dumps(Document(space, path, ref, s).to_json(), default=str) for s in (materialized, replayed)]
        assert as_json[0] == as_json[1], path  # the same keys in the same order, not only equal values
        assert node.document(space, path).state == replayed
        checked += 1
    return checked


# --- random histories -------------------------------------------------------------------------------------------------


class Writer:
    """Random but valid edits of a few documents, published through the node as the write verb does."""

    def __init__(self, node: Node, rng: random.Random) -> None:
        self.node, self.rng = node, rng
        self.paths = ["", "/a", "/a/b", "/a/b/c", "/d", "/e_f", "/e%f", "/A", "/a.b", "/a0"]
        self.counter = 0

    def block(self) -> dict[str, Any]:
        self.counter += 1
        block: dict[str, Any] = {
            "type": self.rng.choice(["Paragraph", "Heading", "Code"]),
            "id": f"b{self.rng.randrange(12)}",
            "text": f"text {self.counter} ünïcode",
            "annotations": [{"type": "Bold", "starts": [0], "ends": [4]}] if self.rng.random() < 0.3 else [],
        }
        if self.rng.random() < 0.3:
            block["childrenType"] = self.rng.choice(["Group", "Ordered"])
        if self.rng.random() < 0.2:
            block["width"] = self.rng.choice([1.5, 2, 300])
        return block

    def ops(self) -> list[dict[str, Any]]:
        ops: list[dict[str, Any]] = []
        for _ in range(self.rng.randrange(1, 5)):
            kind = self.rng.random()
            if kind < 0.4:
                block = self.block()
                ops.append({"type": "ReplaceBlock", "block": block})
                parent = self.rng.choice(["", "", f"b{self.rng.randrange(12)}"])
                ops.append({"type": "MoveBlocks", "parent": parent, "blocks": [block["id"]]})
            elif kind < 0.6:
                ids = self.rng.sample([f"b{i}" for i in range(12)], self.rng.randrange(1, 4))
                ops.append({"type": "MoveBlocks", "parent": self.rng.choice(["", "b1", "b2"]), "blocks": ids})
            elif kind < 0.75:
                ops.append({"type": "DeleteBlocks", "blocks": [f"b{self.rng.randrange(12)}"]})
            else:
                key = self.rng.choice([["name"], ["summary"], ["theme", "headerLayout"], ["icon"]])
                value = None if key != ["name"] and self.rng.random() < 0.3 else f"value {self.counter}"
                ops.append({"type": "SetAttributes", "attrs": [{"key": key, "value": value}]})
        return ops

    def step(self) -> None:
        node, rng = self.node, self.rng
        path = rng.choice(self.paths)
        ref = node.ref(SPACE, path)
        live = ref is not None and not ref.is_tombstone and not ref.is_redirect
        action = rng.random()
        if not live:
            node.publish(node.create(KEY, SPACE, path, self.ops()))
            return
        document = node.document(SPACE, path)
        if action < 0.45:
            node.publish(node.update(KEY, document, self.ops()))
        elif action < 0.55:
            self.batch(document)
        elif action < 0.62 and path:
            target = rng.choice([p for p in self.paths if p and p != path])
            existing = node.ref(SPACE, target)
            if existing is None or existing.is_tombstone or existing.is_redirect:
                node.publish(node.move(KEY, document, target))
        elif action < 0.68 and path:
            node.publish([node.tombstone(KEY, document)])
        elif action < 0.73 and path:
            node.publish([node.redirect(KEY, document, SPACE, rng.choice([p for p in self.paths if p]))])
        elif action < 0.78:
            self.fork_and_merge(document)
        elif action < 0.84:
            self.stale_fork(document)
        elif action < 0.9:
            self.roll_back(document)
        else:
            self.rga_ref(document)

    def _change(self, document: Document, deps: list[str], depth: int, ops: list[dict[str, Any]]) -> Blob:
        ts = self.node._next_ts(KEY, document.state.update_time) + self.rng.randrange(3)
        genesis = CID.parse(document.ref.genesis or "")
        return blobs.change(KEY, genesis=genesis, deps=[CID.parse(d) for d in deps], depth=depth, ops=ops, ts=ts)

    def _ref(self, document: Document, heads: list[str], ts: int) -> Blob:
        return blobs.ref(
            KEY,
            space=SPACE,
            path=document.path,
            genesis=CID.parse(document.ref.genesis or ""),
            heads=[CID.parse(h) for h in heads],
            generation=document.ref.generation,
            ts=max(ts, document.ref.ts + 1),
        )

    def batch(self, document: Document) -> None:
        """Several versions, each with its Ref, stored in one put (the Ref of the last wins)."""
        made: list[Blob] = []
        heads, depth, ts = list(document.state.heads), document.state.depth, document.state.update_time
        for _ in range(self.rng.randrange(2, 5)):
            change = blobs.change(
                KEY,
                genesis=CID.parse(document.ref.genesis or ""),
                deps=[CID.parse(h) for h in heads],
                depth=depth + 1,
                ops=self.ops(),
                ts=(ts := max(ts, self.node._next_ts(KEY, 0)) + len(made) + 1),
            )
            ref = self._ref(document, [str(change.cid)], ts + 1)
            made += [change, ref]
            heads, depth = [str(change.cid)], depth + 1
        if self.rng.random() < 0.5:
            made.reverse()  # Refs before their Changes, as a push from elsewhere may order them
        self.node.publish(made)

    def fork_and_merge(self, document: Document) -> None:
        """Two concurrent changes on the same heads, a Ref naming both, sometimes a merge on top."""
        heads, depth = list(document.state.heads), document.state.depth
        left = self._change(document, heads, depth + 1, self.ops())
        right = self._change(document, heads, depth + 1, self.ops())
        made = [left, right, self._ref(document, [str(left.cid), str(right.cid)], max(left.ts, right.ts) + 1)]
        if self.rng.random() < 0.5:
            merge = self._change(document, [str(left.cid), str(right.cid)], depth + 2, self.ops())
            made += [merge, self._ref(document, [str(merge.cid)], merge.ts + 1)]
        self.node.publish(made)

    def stale_fork(self, document: Document) -> None:
        """A writer that missed the latest change: its change builds on the version before, as deep as the head and
        sometimes older, and a Ref names both tips (so the new change sorts before the last one applied)."""
        (head,) = self.node.store.change_records(document.state.heads[:1])
        if head.depth < 2:
            return
        (older,) = self.node.store.change_records(head.deps[:1])
        ts = head.ts - 1 if self.rng.random() < 0.5 and head.ts - 1 > older.ts else head.ts + 1
        genesis = CID.parse(document.ref.genesis or "")
        stale = blobs.change(KEY, genesis=genesis, deps=[CID.parse(older.cid)], depth=head.depth, ops=self.ops(), ts=ts)
        tips = [*document.state.heads, str(stale.cid)]
        self.node.publish([stale, self._ref(document, tips, self.node._next_ts(KEY, document.ref.ts))])

    def roll_back(self, document: Document) -> None:
        """A later Ref naming an older version (one of its deps' heads)."""
        change = self.node.store.change_records(document.state.heads)[0]
        older = list(change.deps)
        if older and self.node.store.change_records(older) and change.depth > 1:
            self.node.publish([self._ref(document, older, self.node._next_ts(KEY, document.ref.ts))])

    def rga_ref(self, document: Document) -> None:
        """MoveBlocks placed after the block an earlier op moved (RGA refs): one of the same change (`[index]`), and
        in a later version one of this change (`[ts, index, actor index]`)."""
        first, second, third = self.block(), self.block(), self.block()
        ops = [
            {"type": "ReplaceBlock", "block": first},
            {"type": "ReplaceBlock", "block": second},
            {"type": "MoveBlocks", "parent": "", "blocks": [first["id"]]},
            {"type": "MoveBlocks", "parent": "", "blocks": [second["id"]], "ref": [2]},
        ]
        heads = list(document.state.heads)
        change = self._change(document, heads, document.state.depth + 1, ops)
        self.node.publish([change, self._ref(document, [str(change.cid)], change.ts + 1)])
        document = self.node.document(SPACE, document.path)
        ops = [
            {"type": "ReplaceBlock", "block": third},
            {"type": "MoveBlocks", "parent": "", "blocks": [third["id"]], "ref": [change.ts, 2, 0]},
        ]
        later = self._change(document, list(document.state.heads), document.state.depth + 1, ops)
        self.node.publish([later, self._ref(document, [str(later.cid)], later.ts + 1)])


@pytest.mark.parametrize("seed", range(6))
def test_materialized_state_equals_a_full_replay_after_random_histories(db: Database, seed: int) -> None:
    writer = Writer(Node(db), random.Random(seed))
    for step in range(60):
        writer.step()
        if step % 15 == 14:
            assert assert_materialized_equals_replay(db) > 0
    assert assert_materialized_equals_replay(db) > 0


def test_a_ref_whose_changes_arrive_later_is_materialized_when_they_do(db: Database, tmp_path: Path) -> None:
    node = Node(db)
    genesis, change, ref = node.create(KEY, SPACE, "/late", [{"type": "SetAttributes", "attrs": []}])
    other = Database(tmp_path / "other.db")
    try:
        elsewhere = Node(other)
        # Through the store: the ingest gate now refuses a Ref whose heads are not held (test_ingest_order.py).
        elsewhere.store.put([genesis, ref])
        with pytest.raises(NotFound) as missing:
            elsewhere.document(SPACE, "/late")
        assert missing.value.message == (
            f"Version None of hm://{SPACE}/late is not known here: Change {change.cid} is not held by this node."
        )
        elsewhere.ingest([(change.data, str(change.cid))])
        stored = elsewhere.store.materialized(elsewhere.ref(SPACE, "/late") or _missing())
        assert stored is not None
        assert assert_materialized_equals_replay(other) == 1
    finally:
        other.close()


def _missing() -> RefRow:
    raise AssertionError("no ref")


# --- the m010 backfill ----------------------------------------------------------------------------------------------


def test_the_backfill_materializes_documents_stored_before_the_table_existed(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = Database(path)
    writer = Writer(Node(db), random.Random(99))
    for _ in range(80):
        writer.step()
    node = Node(db)
    paths = ["", *writer.paths]
    before = {
        key: json.dumps(node.document(*key).to_json(), default=str)
        for key in _resources(db)
        if (ref := node.ref(*key)) is not None and not ref.is_tombstone and not ref.is_redirect
    }
    listings = {p: [(d.id, node.descendant_count(SPACE, d.path)) for d in node.children(SPACE, p)] for p in paths}
    db.close()
    # The database as a version before m010 left it: blobs and their index rows, no materialized state.
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("DROP TABLE hm_documents")
        conn.execute("DROP TABLE hm_path_counts")
        conn.execute("DROP INDEX hm_blobs_by_author")
        conn.execute("DELETE FROM _harness_migrations WHERE name = 'm010_hm_materialized'")
    db = Database(path)
    try:
        with db.reading() as conn:
            assert conn.execute("SELECT COUNT(*) FROM hm_documents").fetchone()[0] == len(_resources(db))
        assert assert_materialized_equals_replay(db) == len(before) > 0
        node = Node(db)
        assert {key: json.dumps(node.document(*key).to_json(), default=str) for key in before} == before
        assert {
            p: [(d.id, node.descendant_count(SPACE, d.path)) for d in node.children(SPACE, p)] for p in paths
        } == listings
        assert {p: node.child_count(SPACE, p) for p in paths} == {p: len(listings[p]) for p in paths}
    finally:
        db.close()


# --- directory listings ---------------------------------------------------------------------------------------------


def _replayed_children(db: Database, path: str) -> list[tuple[str, int]]:
    """Children (path, descendant count) as the node listed them before m010: every Ref's winner, filtered."""
    with db.reading() as conn:
        rows = conn.execute(
            "SELECT path, heads, redirect_space FROM hm_refs WHERE space = ? ORDER BY path, generation DESC, ts DESC, "
            "cid DESC",
            (SPACE,),
        ).fetchall()
    winners: dict[str, bool] = {}
    for row in rows:
        winners.setdefault(row["path"], bool(row["heads"]) and row["redirect_space"] is None)
    live = [p for p, alive in winners.items() if alive]
    below = [p for p in live if p.startswith(path + "/") and p.count("/") == path.count("/") + 1]
    return [(p, sum(1 for q in live if q.startswith(p + "/"))) for p in below]


def test_directory_listing_contents_order_and_counts_are_the_winners_below_a_path(db: Database) -> None:
    node = Node(db)
    writer = Writer(node, random.Random(7))
    writer.paths += ["/a/b/x", "/a/é", "/a/B", "/a/b_", "/a/b%", "/a//z"]
    for _ in range(120):
        writer.step()
    for path in ["", *writer.paths]:
        listed = [(d.path, node.descendant_count(SPACE, d.path)) for d in node.children(SPACE, path)]
        assert listed == _replayed_children(db, path), path
        assert node.child_count(SPACE, path) == len(listed)
        for child in node.children(SPACE, path):
            assert child.state == Node(db).state(child.ref.heads)
        paged: list[str] = []
        while True:
            page = node.children(SPACE, path, after=paged[-1] if paged else None, limit=2)
            paged += [d.path for d in page]
            if len(page) < 2:
                break
        assert paged == [p for p, _ in listed]
