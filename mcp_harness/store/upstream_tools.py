"""The rows of `mcp_servers` and `mcp_tools` (schema: store/upstream.py): mounted servers and their tools' documents."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import cbor2

from mcp_harness.callables.documents import ToolDocument, cid_of_bytes
from mcp_harness.callables.upstream import ServerSpec
from mcp_harness.errors import Conflict
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Store
from mcp_harness.store.tools import ToolRecord
from mcp_harness.store.upstream import SyncReport


def _record(row: Any) -> ToolRecord:
    return ToolRecord(
        document=ToolDocument.from_json(cbor2.loads(row["doc_cbor"])),
        cid=row["cid"],
        enabled=True,
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class UpstreamStore:
    """Server and tool rows. Methods block; call them off the event loop."""

    def __init__(self, db: Store) -> None:
        self.db = db
        self._tools: tuple[int, list[ToolRecord], dict[tuple[str, str], ToolRecord]] | None = None
        self._servers: tuple[int, list[ServerSpec]] | None = None
        """The stored servers as of a `data_version` (another process's `mcp add` moves it; ours clear it): every
        relayed call asks which servers are mounted, and decoding each spec again cost more than the lookup."""

    # -- servers ---------------------------------------------------------------------------------------------

    def list_servers(self) -> list[ServerSpec]:
        stamp = self.db.data_version()
        cached = self._servers
        if cached is None or cached[0] != stamp:
            with self.db.reading() as conn:
                rows = conn.execute("SELECT spec_cbor FROM mcp_servers ORDER BY name").fetchall()
            cached = self._servers = (stamp, [ServerSpec.from_json(cbor2.loads(r["spec_cbor"])) for r in rows])
        return list(cached[1])

    def add_server(self, spec: ServerSpec) -> None:
        """Raises Conflict when a stored server has that name."""
        ts = now_ms()
        with self.db.transaction() as conn:
            if conn.execute("SELECT 1 FROM mcp_servers WHERE name = ?", (spec.name,)).fetchone():
                raise Conflict(
                    f"An MCP server named {spec.name} is already mounted; `mcp-harness mcp remove {spec.name}` first."
                )
            conn.execute(
                "INSERT INTO mcp_servers (name, spec_cbor, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (spec.name, cbor2.dumps(spec.to_json()), ts, ts),
            )
        self._servers = None

    def remove_server(self, name: str) -> bool:
        """Unmount a stored server and drop its documents; False when no stored server has that name."""
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM mcp_servers WHERE name = ?", (name,))
            conn.execute("DELETE FROM mcp_tools WHERE server = ?", (name,))
        self._tools = self._servers = None
        return cur.rowcount > 0

    # -- tool documents ----------------------------------------------------------------------------------------

    def tools(self, servers: Collection[str] | None = None) -> list[ToolRecord]:
        """The documents of these servers' tools (all servers' when None), in name order. Every listing reads this,
        so the decoded rows are kept until the database changes."""
        records = self._kept()[1]
        if servers is None:
            return list(records)
        return [r for r in records if _server_of(r) in servers]

    def tool(self, server: str, name: str) -> ToolRecord | None:
        """One server's tool document by name, from the rows `tools` keeps (every upstream call looks one up)."""
        return self._kept()[2].get((server, name))

    def _kept(self) -> tuple[int, list[ToolRecord], dict[tuple[str, str], ToolRecord]]:
        stamp = self.db.data_version()
        if self._tools is None or self._tools[0] != stamp:
            with self.db.reading() as conn:
                rows = conn.execute("SELECT * FROM mcp_tools ORDER BY name").fetchall()
            records = [_record(r) for r in rows]
            self._tools = (stamp, records, {(_server_of(r), r.name): r for r in records})
        return self._tools

    def has_tools(self, server: str) -> bool:
        with self.db.reading() as conn:
            return conn.execute("SELECT 1 FROM mcp_tools WHERE server = ? LIMIT 1", (server,)).fetchone() is not None

    def sync_tools(self, server: str, documents: Iterable[ToolDocument]) -> SyncReport:
        """Make the server's stored documents exactly `documents`, rewriting only the rows whose CID differs."""
        encoded = []
        for doc in documents:
            data = doc.encode()
            encoded.append((doc, data, cid_of_bytes(data)))
        ts = now_ms()
        added: list[str] = []
        changed: list[str] = []
        with self.db.transaction() as conn:
            stored = {
                row["name"]: row["cid"]
                for row in conn.execute("SELECT name, cid FROM mcp_tools WHERE server = ?", (server,))
            }
            for doc, data, cid in encoded:
                before = stored.get(doc.name)
                if before == cid:
                    continue
                (added if before is None else changed).append(doc.name)
                conn.execute(
                    "INSERT INTO mcp_tools (server, name, cid, doc_cbor, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (server, name) DO UPDATE SET "
                    "cid = excluded.cid, doc_cbor = excluded.doc_cbor, updated_at = excluded.updated_at",
                    (server, doc.name, cid, data, ts, ts),
                )
            wanted = {doc.name for doc, _, _ in encoded}
            removed = sorted(set(stored) - wanted)
            conn.executemany("DELETE FROM mcp_tools WHERE server = ? AND name = ?", [(server, n) for n in removed])
        if added or changed or removed:
            self._tools = None
        unchanged = len(encoded) - len(added) - len(changed)
        return SyncReport(tuple(added), tuple(changed), tuple(removed), unchanged)


def _server_of(record: ToolRecord) -> str:
    binding = record.document.binding or ""
    return binding.removeprefix("mcp://").partition("/")[0]
