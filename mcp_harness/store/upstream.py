"""Mounted MCP servers and the tool documents of their tools (issue 20).

`mcp_servers` holds the servers `mcp-harness mcp add` mounted (the config's `[[mcp.servers]]` are not copied here);
`mcp_tools` holds one tool document per upstream tool of any mounted server, config or stored, as its DAG-CBOR bytes
and CID, like `tool_documents`. A sync rewrites only the rows whose CID changed and drops the tools that are gone.

This module holds the schema (the migrations import it, so it imports nothing of the package); the store itself is
`store/upstream_tools.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcp_harness.store.port import Connection

SCHEMA = (
    """
    CREATE TABLE mcp_servers (
        name TEXT PRIMARY KEY,
        spec_cbor BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE mcp_tools (
        server TEXT NOT NULL,
        name TEXT NOT NULL,
        cid TEXT NOT NULL,
        doc_cbor BLOB NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (server, name)
    ) WITHOUT ROWID
    """,
)


def migrate(conn: Connection) -> None:
    for statement in SCHEMA:
        conn.execute(statement)


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What a sync of one server's documents changed, by tool document name."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: int = 0

    def to_json(self) -> dict[str, object]:
        return {
            "added": list(self.added),
            "changed": list(self.changed),
            "removed": list(self.removed),
            "unchanged": self.unchanged,
        }
