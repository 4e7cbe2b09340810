"""Provider rows added with `mcp-harness provider add`. A row names where the key is, never the key itself.

Rows are stored as given; `mcp_harness.models.providers` decides what they mean (a hosted type's `base_url`, for
one, is never used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cbor2

from mcp_harness.errors import Conflict
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Store


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderRow:
    account_id: str
    name: str
    type: str
    base_url: str | None = None
    api_key_secret: str | None = None
    """Name of the sealed secret holding the key."""
    api_key_env: str | None = None
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict[str, Any])
    """Type-specific settings without a column of their own (`file` for scripted; `ownsSecret`)."""
    created_at: int = 0
    updated_at: int = 0


def _row(row: Any) -> ProviderRow:
    raw = row["options_cbor"]
    options = cbor2.loads(raw) if raw else {}
    return ProviderRow(
        account_id=row["account_id"],
        name=row["name"],
        type=row["type"],
        base_url=row["base_url"],
        api_key_secret=row["api_key_secret"],
        api_key_env=row["api_key_env"],
        model=row["model"],
        options=options if isinstance(options, dict) else {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class ProviderStore:
    """Provider rows. Methods block; call them off the event loop."""

    def __init__(self, db: Store) -> None:
        self.db = db

    def list(self, account_id: str) -> list[ProviderRow]:
        with self.db.reading() as conn:
            rows = conn.execute("SELECT * FROM providers WHERE account_id = ? ORDER BY name", (account_id,)).fetchall()
        return [_row(r) for r in rows]

    def get(self, account_id: str, name: str) -> ProviderRow | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT * FROM providers WHERE account_id = ? AND name = ?", (account_id, name)
            ).fetchone()
        return None if row is None else _row(row)

    def insert(self, row: ProviderRow) -> ProviderRow:
        """Add a row; call inside `db.transaction()` to make it atomic with other changes (a sealed key).

        Raises:
            Conflict: the account already has a provider of that name.
        """
        ts = now_ms()
        with self.db.transaction() as conn:
            if conn.execute(
                "SELECT 1 FROM providers WHERE account_id = ? AND name = ?", (row.account_id, row.name)
            ).fetchone():
                raise Conflict(
                    f"A provider named {row.name!r} already exists; delete it first "
                    f"(`mcp-harness provider delete {row.name}`) or pick another name."
                )
            conn.execute(
                "INSERT INTO providers (account_id, name, type, base_url, api_key_secret, api_key_env, model, "
                "options_cbor, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.account_id,
                    row.name,
                    row.type,
                    row.base_url,
                    row.api_key_secret,
                    row.api_key_env,
                    row.model,
                    cbor2.dumps(row.options, canonical=True) if row.options else None,
                    ts,
                    ts,
                ),
            )
        stored = self.get(row.account_id, row.name)
        assert stored is not None
        return stored

    def delete(self, account_id: str, name: str) -> bool:
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM providers WHERE account_id = ? AND name = ?", (account_id, name))
        return cur.rowcount > 0
