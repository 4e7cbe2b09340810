"""Sealed secrets: provider API keys, signing seeds, anything the owner must not leave in plaintext.

Each value is sealed (PyNaCl `SecretBox`) under the master key, which never enters the database. What is sealed is a
small CBOR envelope `[format, account id, name, value]`, so a sealed value copied into another row by someone who can
write the database but lacks the key does not open as that row. Listing and metadata never need the key; only
reading or writing a value loads it.

The first time a master key is used with a database, a known plaintext is sealed into `_harness_key_check`; every
later process opens it before touching a secret, so a wrong or replaced key is refused with advice instead of
producing garbage or sealing new secrets under a key the old ones do not share.
"""

from __future__ import annotations

import builtins
import logging
import re
from dataclasses import dataclass
from typing import Any

import cbor2

from mcp_harness.config import Settings
from mcp_harness.errors import BadRequest, Conflict, NotFound, StorageError, TooLarge
from mcp_harness.identity.sealing import MASTER_KEY_ENV, MasterKey, load_master_key, master_key_path
from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Store

logger = logging.getLogger(__name__)

NAME_RULE = re.compile(r"[A-Za-z0-9._:-]+")
MAX_NAME_BYTES = 128
MAX_KIND_BYTES = 64
MAX_VALUE_BYTES = 64 * 1024
"""As the reference's SetSecret: a secret is a key or a seed, not a file."""
MAX_METADATA_BYTES = 16 * 1024
KEY_CHECK_PLAINTEXT = b"mcp-harness master key check v1"
_ENVELOPE = "mcp-harness/secret/1"


@dataclass(frozen=True, kw_only=True, slots=True)
class SecretRecord:
    """What may be shown about a secret: everything except the value (not even its length)."""

    name: str
    kind: str
    """`secret`, `hm-account-key` for signing identities, or another owner-chosen tag."""
    metadata: dict[str, Any]
    """Shown freely, so it must never hold anything secret (identities keep kind, account id and label here)."""
    created_at: int
    updated_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "metadata": self.metadata,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


def check_name(name: str, label: str = "Secret name", limit: int = MAX_NAME_BYTES) -> str:
    """Refuse a name that is empty, too long, or uses characters outside `[A-Za-z0-9._:-]`."""
    if not name or len(name.encode("utf-8")) > limit or not NAME_RULE.fullmatch(name):
        raise BadRequest(f"{label} {name!r} is invalid: use 1 to {limit} characters from letters, digits and . _ : -")
    return name


def _record(row: Any) -> SecretRecord:
    blob = row["metadata_cbor"]
    return SecretRecord(
        name=row["name"],
        kind=row["kind"],
        metadata=dict(cbor2.loads(blob)) if blob is not None else {},
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _encode_metadata(metadata: dict[str, Any] | None) -> bytes | None:
    if not metadata:
        return None
    if not all(isinstance(k, str) for k in metadata):
        raise BadRequest("Secret metadata keys must be strings.")
    try:
        encoded = cbor2.dumps(metadata, canonical=True)
    except (cbor2.CBOREncodeError, TypeError, ValueError) as exc:
        raise BadRequest("Secret metadata must hold only JSON-like values (strings, numbers, lists, maps).") from exc
    if len(encoded) > MAX_METADATA_BYTES:
        raise TooLarge(f"Secret metadata is too large: at most {MAX_METADATA_BYTES} bytes of CBOR.")
    return encoded


class SecretStore:
    """Secret rows. Methods block (SQLite, the key file); call them off the event loop."""

    def __init__(self, db: Store, settings: Settings) -> None:
        self.db = db
        self.data_dir = settings.data_dir
        self._master: MasterKey | None = None

    # -- the master key ------------------------------------------------------------------------------------

    def master_key(self) -> MasterKey:
        """The master key, loaded and checked against this database once per store.

        Raises:
            StorageError: the key is missing or is not the one this database's secrets were sealed with.
            BadRequest: `MCP_HARNESS_MASTER_KEY` is malformed.
        """
        if self._master is not None:
            return self._master
        # No lock: loading twice is harmless (the check row is inserted with OR IGNORE), and a lock taken here and
        # then the database's would deadlock against a caller already inside a transaction.
        with self.db.reading() as conn:
            check = conn.execute("SELECT sealed FROM _harness_key_check WHERE id = 1").fetchone()
            # Without a check row (its insert was rolled back with a caller's transaction) an existing secret is
            # the proof instead, so a wrong key is never written into the check row.
            sample = None if check is not None else conn.execute("SELECT sealed FROM secrets LIMIT 1").fetchone()
        key = load_master_key(self.data_dir, create=check is None and sample is None)
        if sample is not None:
            self._require(key, sample["sealed"], None)
        if check is None:
            with self.db.transaction() as conn:
                conn.execute(
                    "INSERT OR IGNORE INTO _harness_key_check (id, sealed, created_at) VALUES (1, ?, ?)",
                    (key.seal(KEY_CHECK_PLAINTEXT), now_ms()),
                )
                check = conn.execute("SELECT sealed FROM _harness_key_check WHERE id = 1").fetchone()
        self._require(key, check["sealed"], KEY_CHECK_PLAINTEXT)
        self._master = key
        return key

    def _require(self, key: MasterKey, sealed: bytes, expected: bytes | None) -> None:
        try:
            opened = key.open(sealed)
        except StorageError:
            opened = None
        if opened is None or (expected is not None and opened != expected):
            raise StorageError(
                f"The master key from {key.source} is not the key this database's secrets were sealed with. Restore "
                f"{master_key_path(self.data_dir)} from a backup, or set {MASTER_KEY_ENV} to the original key. "
                "Secrets cannot be read or written until then; nothing was changed."
            )

    def _seal(self, account_id: str, name: str, value: bytes) -> bytes:
        return self.master_key().seal(cbor2.dumps([_ENVELOPE, account_id, name, value]))

    def _open(self, account_id: str, name: str, sealed: bytes) -> bytes:
        envelope = cbor2.loads(self.master_key().open(sealed))
        if (
            not isinstance(envelope, list)
            or len(envelope) != 4  # pyright: ignore[reportUnknownArgumentType]
            or envelope[:3] != [_ENVELOPE, account_id, name]
            or not isinstance(envelope[3], bytes)
        ):
            raise StorageError(
                f"Secret {name!r} holds a value sealed for another secret (the row was copied or altered). "
                f"Set it again with `mcp-harness secret set {name}`."
            )
        return envelope[3]

    # -- rows ----------------------------------------------------------------------------------------------

    def set(
        self, account_id: str, name: str, value: bytes, *, kind: str = "secret", metadata: dict[str, Any] | None = None
    ) -> SecretRecord:
        """Create or replace a secret. Replacing keeps `created_at`; a secret of another kind is not overwritten.

        Raises:
            BadRequest: the name, kind, value or metadata is invalid.
            Conflict: a secret of that name exists with another kind (delete it first).
            TooLarge: the value is over 64 KiB.
        """
        return self._write(account_id, name, value, kind, metadata, replace=True)

    def create(
        self, account_id: str, name: str, value: bytes, *, kind: str = "secret", metadata: dict[str, Any] | None = None
    ) -> SecretRecord:
        """Create a secret that must not exist yet.

        Raises:
            Conflict: a secret of that name exists.
        """
        return self._write(account_id, name, value, kind, metadata, replace=False)

    def _write(
        self, account_id: str, name: str, value: bytes, kind: str, metadata: dict[str, Any] | None, *, replace: bool
    ) -> SecretRecord:
        check_name(name)
        check_name(kind, "Secret kind", MAX_KIND_BYTES)
        if not value:
            raise BadRequest(f"Secret {name!r} is empty; a secret needs a value.")
        if len(value) > MAX_VALUE_BYTES:
            raise TooLarge(f"Secret {name!r} is too large: at most {MAX_VALUE_BYTES} bytes.")
        encoded_metadata = _encode_metadata(metadata)
        sealed = self._seal(account_id, name, bytes(value))
        ts = now_ms()
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT kind FROM secrets WHERE account_id = ? AND name = ?", (account_id, name)
            ).fetchone()
            if row is not None and not replace:
                raise Conflict(f"A secret named {name!r} already exists. `mcp-harness secret list` shows them.")
            if row is not None and row["kind"] != kind:
                raise Conflict(
                    f"Secret {name!r} is a {row['kind']!r}, not a {kind!r}; it is not overwritten. Delete it first "
                    f"(`mcp-harness secret delete {name}`) if you mean to replace it."
                )
            conn.execute(
                "INSERT INTO secrets (account_id, name, kind, metadata_cbor, sealed, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account_id, name) DO UPDATE SET "
                "metadata_cbor = excluded.metadata_cbor, sealed = excluded.sealed, updated_at = excluded.updated_at",
                (account_id, name, kind, encoded_metadata, sealed, ts, ts),
            )
        logger.debug("stored secret %r (kind %s)", name, kind)
        found = self.find(account_id, name)
        assert found is not None
        return found

    def update_metadata(self, account_id: str, name: str, metadata: dict[str, Any] | None) -> SecretRecord:
        """Replace a secret's metadata; the sealed value is untouched (and the master key not needed).

        Raises:
            NotFound: no such secret.
        """
        encoded = _encode_metadata(metadata)
        with self.db.transaction() as conn:
            cur = conn.execute(
                "UPDATE secrets SET metadata_cbor = ?, updated_at = ? WHERE account_id = ? AND name = ?",
                (encoded, now_ms(), account_id, name),
            )
        if cur.rowcount == 0:
            raise NotFound(f"No secret named {name!r}. `mcp-harness secret list` shows them.")
        found = self.find(account_id, name)
        assert found is not None
        return found

    def get_value(self, account_id: str, name: str) -> bytes:
        """The plaintext of a secret, for the code that uses it (a provider call, a signature). Never log it.

        Raises:
            NotFound: no such secret.
            StorageError: the master key does not open it.
        """
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT sealed FROM secrets WHERE account_id = ? AND name = ?", (account_id, name)
            ).fetchone()
        if row is None:
            raise NotFound(f"No secret named {name!r}. `mcp-harness secret list` shows them.")
        return self._open(account_id, name, row["sealed"])

    def find(self, account_id: str, name: str) -> SecretRecord | None:
        with self.db.reading() as conn:
            row = conn.execute(
                "SELECT name, kind, metadata_cbor, created_at, updated_at FROM secrets "
                "WHERE account_id = ? AND name = ?",
                (account_id, name),
            ).fetchone()
        return None if row is None else _record(row)

    def list(self, account_id: str, *, kind: str | None = None) -> builtins.list[SecretRecord]:
        """Every secret of the account (of one kind, if given), by name. Never opens a value."""
        query = "SELECT name, kind, metadata_cbor, created_at, updated_at FROM secrets WHERE account_id = ?"
        params: tuple[str, ...] = (account_id,)
        if kind is not None:
            query += " AND kind = ?"
            params += (kind,)
        with self.db.reading() as conn:
            rows = conn.execute(query + " ORDER BY name", params).fetchall()
        return [_record(r) for r in rows]

    def delete(self, account_id: str, name: str) -> bool:
        """Remove a secret; False if there was none."""
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM secrets WHERE account_id = ? AND name = ?", (account_id, name))
        if cur.rowcount:
            logger.debug("deleted secret %r", name)
        return cur.rowcount > 0


__all__ = ["SecretRecord", "SecretStore", "check_name"]
