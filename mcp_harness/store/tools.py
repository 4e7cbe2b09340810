"""Per-agent tool documents: builtins rewritten only when their CID changes, lambdas upserted by the agent."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import cbor2

from mcp_harness.callables.documents import ToolDocument, cid_of_bytes
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Store


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolRecord:
    document: ToolDocument
    cid: str
    enabled: bool
    created_at: int
    updated_at: int

    @property
    def name(self) -> str:
        return self.document.name

    @property
    def kind(self) -> str:
        return self.document.kind


def _record(row: Any) -> ToolRecord:
    return ToolRecord(
        document=ToolDocument.from_json(cbor2.loads(row["doc_cbor"])),
        cid=row["cid"],
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


_ENCODED: dict[int, tuple[ToolDocument, bytes, str]] = {}


def _encoded(doc: ToolDocument) -> tuple[bytes, str]:
    """`doc.encode()` and its CID, memoized by document identity (callers pass the same builtin objects)."""
    found = _ENCODED.get(id(doc))
    if found is not None and found[0] is doc:
        return found[1], found[2]
    data = doc.encode()
    cid = cid_of_bytes(data)
    _ENCODED[id(doc)] = (doc, data, cid)
    return data, cid


class ToolStore:
    """Tool document rows. Methods block; call them off the event loop."""

    def __init__(self, db: Store) -> None:
        self.db = db
        self._materialized: dict[str, frozenset[tuple[str, str]]] = {}
        # Every model turn lists the agent's tools (for the <space> index); decoded lists are kept until this
        # store writes (`_generation`) or another process commits (`data_version`).
        self._lists: dict[str, tuple[tuple[int, int], list[ToolRecord]]] = {}
        self._generation = 0

    def _changed(self) -> None:
        self._generation += 1
        self._lists.clear()

    def ensure_builtins(self, agent_id: str, documents: Iterable[ToolDocument]) -> None:
        """Upsert each builtin whose stored CID differs; `enabled` and `created_at` are left as they are.

        Remembered per process, so the common case (nothing changed since the last call) costs no query; the
        encodings themselves are memoized per document, since builtins change only with the host's runtimes.
        """
        encoded = [(doc, *_encoded(doc)) for doc in documents]
        wanted = frozenset((doc.name, cid) for doc, _, cid in encoded)
        if self._materialized.get(agent_id) == wanted:
            return
        ts = now_ms()
        with self.db.transaction() as conn:
            stored = {
                row["name"]: row["cid"]
                for row in conn.execute("SELECT name, cid FROM tool_documents WHERE agent_id = ?", (agent_id,))
            }
            for doc, data, cid in encoded:
                if stored.get(doc.name) == cid:
                    continue
                conn.execute(
                    "INSERT INTO tool_documents (agent_id, name, kind, cid, doc_cbor, created_at, updated_at) "
                    "VALUES (?, ?, 'builtin', ?, ?, ?, ?) ON CONFLICT (agent_id, name) DO UPDATE SET "
                    "kind = excluded.kind, cid = excluded.cid, doc_cbor = excluded.doc_cbor, "
                    "updated_at = excluded.updated_at",
                    (agent_id, doc.name, cid, data, ts, ts),
                )
                self._changed()
        self._materialized[agent_id] = wanted

    def get(self, agent_id: str, name: str) -> ToolRecord | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT * FROM tool_documents WHERE agent_id = ? AND name = ?", (agent_id, name)
            ).fetchone()
        return None if row is None else _record(row)

    def list(self, agent_id: str) -> list[ToolRecord]:
        """Every document of the agent, in name order."""
        with self.db.reading() as conn:
            stamp = (self.db.data_version(), self._generation)
            cached = self._lists.get(agent_id)
            if cached is not None and cached[0] == stamp:
                return list(cached[1])
            rows = conn.execute("SELECT * FROM tool_documents WHERE agent_id = ? ORDER BY name", (agent_id,)).fetchall()
        records = [_record(r) for r in rows]
        self._lists[agent_id] = (stamp, records)
        return list(records)

    def save_lambda(self, agent_id: str, doc: ToolDocument) -> str:
        """Create or replace the agent's lambda of that name; returns its CID."""
        data = doc.encode()
        cid = cid_of_bytes(data)
        ts = now_ms()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO tool_documents (agent_id, name, kind, cid, doc_cbor, enabled, created_at, updated_at) "
                "VALUES (?, ?, 'lambda', ?, ?, 1, ?, ?) ON CONFLICT (agent_id, name) DO UPDATE SET "
                "kind = excluded.kind, cid = excluded.cid, doc_cbor = excluded.doc_cbor, "
                "updated_at = excluded.updated_at",
                (agent_id, doc.name, cid, data, ts, ts),
            )
            self._changed()
        return cid

    def delete_lambda(self, agent_id: str, name: str) -> bool:
        with self.db.transaction() as conn:
            cur = conn.execute(
                "DELETE FROM tool_documents WHERE agent_id = ? AND name = ? AND kind = 'lambda'", (agent_id, name)
            )
            self._changed()
        return cur.rowcount > 0
