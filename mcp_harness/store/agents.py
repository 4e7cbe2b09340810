"""Accounts and agents. An agent is a definition row plus a private state directory (its memory lives there)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_harness.definition import AgentDefinition
from mcp_harness.errors import Conflict, NotFound
from mcp_harness.store._util import new_id, now_ms
from mcp_harness.store.port import Store


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentRecord:
    id: str
    account_id: str
    definition: AgentDefinition
    state_dir: Path
    status: str
    created_at: int
    updated_at: int

    @property
    def memory_dir(self) -> Path:
        return self.state_dir / "memory"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "accountId": self.account_id,
            "definition": self.definition.to_json(),
            "status": self.status,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


def _row(row: Any) -> AgentRecord:
    return AgentRecord(
        id=row["id"],
        account_id=row["account_id"],
        definition=AgentDefinition.from_cbor(row["definition_cbor"]),
        state_dir=Path(row["state_dir"]),
        status=row["status"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class AgentStore:
    """Agent rows. Methods block; call them through `Database.call`."""

    def __init__(self, db: Store, data_dir: Path) -> None:
        self.db = db
        self.data_dir = data_dir
        # Every verb call needs its agent's definition; decoding it from CBOR each time is a measurable share of a
        # call. Entries are valid while neither this store (`_generation`) nor another process (`data_version`)
        # has committed since they were read.
        self._cache: dict[str, tuple[tuple[int, int], AgentRecord]] = {}
        self._generation = 0

    def _changed(self) -> None:
        self._generation += 1
        self._cache.clear()

    def ensure_account(self, account_id: str, name: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO accounts (id, name, created_at) VALUES (?, ?, ?)", (account_id, name, now_ms())
            )

    def create(self, account_id: str, definition: AgentDefinition) -> AgentRecord:
        """Create an agent; its name must be unused on the account.

        Raises:
            Conflict: an agent with that name exists.
        """
        agent_id = new_id()
        state_dir = self.data_dir / "agents" / agent_id
        ts = now_ms()
        with self.db.transaction() as conn:
            if conn.execute(
                "SELECT 1 FROM agents WHERE account_id = ? AND name = ?", (account_id, definition.name)
            ).fetchone():
                raise Conflict(f"An agent named {definition.name!r} already exists; pick another name or update it.")
            conn.execute(
                "INSERT INTO agents (id, account_id, name, definition_cbor, state_dir, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (agent_id, account_id, definition.name, definition.to_cbor(), str(state_dir), ts, ts),
            )
            self._changed()
        (state_dir / "memory").mkdir(parents=True, exist_ok=True)
        return self.get(agent_id)

    def get(self, agent_id: str) -> AgentRecord:
        with self.db.reading() as conn:
            stamp = (self.db.data_version(), self._generation)
            cached = self._cache.get(agent_id)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            row = conn.execute("SELECT * FROM agents WHERE id = ?", (agent_id,)).fetchone()
        if row is None:
            raise NotFound(f"No agent {agent_id}. List agents with `mcp-harness agent list`.")
        record = _row(row)
        self._cache[agent_id] = (stamp, record)
        return record

    def find(self, account_id: str, name_or_id: str) -> AgentRecord | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT * FROM agents WHERE account_id = ? AND (id = ? OR name = ?)",
                (account_id, name_or_id, name_or_id),
            ).fetchone()
        return None if row is None else _row(row)

    def list(self, account_id: str) -> list[AgentRecord]:
        with self.db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM agents WHERE account_id = ? ORDER BY updated_at DESC", (account_id,)
            ).fetchall()
        return [_row(r) for r in rows]

    def update(self, agent_id: str, definition: AgentDefinition) -> AgentRecord:
        with self.db.transaction() as conn:
            current = conn.execute("SELECT account_id FROM agents WHERE id = ?", (agent_id,)).fetchone()
            if current is None:
                raise NotFound(f"No agent {agent_id}.")
            clash = conn.execute(
                "SELECT 1 FROM agents WHERE account_id = ? AND name = ? AND id <> ?",
                (current["account_id"], definition.name, agent_id),
            ).fetchone()
            if clash:
                raise Conflict(f"Another agent is already named {definition.name!r}.")
            conn.execute(
                "UPDATE agents SET name = ?, definition_cbor = ?, updated_at = ? WHERE id = ?",
                (definition.name, definition.to_cbor(), now_ms(), agent_id),
            )
            self._changed()
        return self.get(agent_id)

    def delete(self, agent_id: str) -> None:
        """Delete the agent, its sessions and events, detach its runs, then remove its state directory."""
        record = self.get(agent_id)
        with self.db.transaction() as conn:
            conn.execute("UPDATE runs SET agent_id = NULL, session_id = NULL WHERE agent_id = ?", (agent_id,))
            conn.execute(
                "UPDATE runs SET session_id = NULL WHERE session_id IN (SELECT id FROM sessions WHERE agent_id = ?)",
                (agent_id,),
            )
            conn.execute(
                "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IN "
                "(SELECT id FROM sessions WHERE agent_id = ?)",
                (agent_id,),
            )
            conn.execute("DELETE FROM sessions WHERE agent_id = ?", (agent_id,))
            conn.execute("DELETE FROM agents WHERE id = ?", (agent_id,))
            self._changed()
        shutil.rmtree(record.state_dir, ignore_errors=True)

    def count_sessions(self, agent_id: str) -> int:
        with self.db.reading() as conn:
            row = conn.execute("SELECT COUNT(*) FROM sessions WHERE agent_id = ?", (agent_id,)).fetchone()
        return int(row[0])
