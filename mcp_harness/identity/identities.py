"""Signing identities (HARNESS §14): Ed25519 accounts the owner lets agents sign as.

An identity is a sealed secret of kind `hm-account-key` holding the 32-byte seed, named
`hm-account-<first 16 characters of the account id>`, with metadata `{kind, accountId, label, generatedBy |
importedBy}`. The label is the human name the account will publish as its profile name; publishing a profile (and the
reference's home document) arrives with the hypermedia node, so for now create and import publish nothing and need no
network. Agents name identities by secret name in `signingKey` / `signingKeys` (the CLI and `[agent] signing_keys`
accept a label or account id too and store the secret name).

Functions here block (SQLite, the key file); call them off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mcp_harness.errors import BadRequest, Conflict, NotFound, StorageError
from mcp_harness.identity.keys import SEED_BYTES, KeyPair, decode_key_text
from mcp_harness.store.secrets import SecretRecord

if TYPE_CHECKING:
    from mcp_harness.definition import AgentDefinition
    from mcp_harness.hypermedia.node import Node
    from mcp_harness.store import Database
    from mcp_harness.store.secrets import SecretStore

IDENTITY_KIND = "hm-account-key"
SECRET_PREFIX = "hm-account-"
MAX_LABEL_BYTES = 256
_CREATE_HINT = "`mcp-harness identity create --label NAME` (or `identity import` for an existing seed)"


class Keyring(Protocol):
    """What identities live in: the account's sealed secrets, the node their profiles are published to, and the
    database both share (creating an identity and publishing its profile is one transaction)."""

    @property
    def account_id(self) -> str: ...
    @property
    def db(self) -> Database: ...
    @property
    def secrets(self) -> SecretStore: ...
    @property
    def hypermedia(self) -> Node: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Identity:
    """A signing identity as it may be shown: never the seed."""

    name: str
    """The secret name agents use in `signingKey` / `signingKeys`."""
    account_id: str
    """The `z6Mk…` account id."""
    label: str
    """The human name (profile name) of the account."""
    created_at: int
    updated_at: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "accountId": self.account_id,
            "label": self.label,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


def secret_name_for(account_id: str) -> str:
    """`hm-account-<first 16 characters of the account id>`, the reference's naming."""
    return SECRET_PREFIX + account_id[:16]


def parse_seed(data: bytes) -> bytes:
    """A 32-byte seed from what a user supplies: exactly 32 raw bytes, or 64 hex characters, or base64 of 32 bytes.

    Raises:
        BadRequest: none of those forms (the message never repeats the input).
    """
    if len(data) == SEED_BYTES:
        return bytes(data)  # hex is 64 characters and base64 43 or 44, so 32 bytes can only be raw
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        text = ""
    decoded = decode_key_text(text, SEED_BYTES) or b""
    if len(decoded) != SEED_BYTES:
        raise BadRequest(
            f"A signing seed must be exactly {SEED_BYTES} bytes: give 64 hex characters, base64 of {SEED_BYTES} "
            f"bytes, or a file of exactly {SEED_BYTES} raw bytes (got {len(data)} bytes of input in none of these)."
        )
    return decoded


def _label(label: str | None, account_id: str) -> str:
    text = (label or "").strip()
    if not text:
        return f"Agent account {account_id[:10]}"  # the reference's display name when no label is given
    if len(text.encode("utf-8")) > MAX_LABEL_BYTES:
        raise BadRequest(f"Identity label is too large: at most {MAX_LABEL_BYTES} bytes.")
    return text


def _identity(record: SecretRecord) -> Identity:
    account = str(record.metadata.get("accountId", ""))
    return Identity(
        name=record.name,
        account_id=account,
        label=str(record.metadata.get("label") or f"Agent account {account[:10]}"),
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _store(keyring: Keyring, pair: KeyPair, label: str | None, origin: dict[str, str]) -> Identity:
    account = pair.account_id
    metadata = {"kind": IDENTITY_KIND, "accountId": account, "label": _label(label, account), **origin}
    name = secret_name_for(account)
    if keyring.secrets.find(keyring.account_id, name) is not None:
        raise Conflict(f"This account key is already on the server ({account}); `mcp-harness identity list` shows it.")
    record = keyring.secrets.create(keyring.account_id, name, pair.seed, kind=IDENTITY_KIND, metadata=metadata)
    return _identity(record)


def create_identity(keyring: Keyring, label: str | None = None) -> Identity:
    """Generate a fresh Ed25519 key, store its seed sealed, and publish its profile and home document.

    One transaction: an identity is never stored without its profile, nor a profile left for a key that was not kept.
    """
    pair = KeyPair.generate()
    with keyring.db.transaction():
        identity = _store(keyring, pair, label, {"generatedBy": "mcp-harness"})
        _publish_account(keyring, pair, identity.label)
    return identity


HOME_DOCUMENT = "This is an agentic account."
"""The reference's home-document body for a new signing identity (HARNESS §14)."""


def _publish_account(keyring: Keyring, pair: KeyPair, name: str) -> None:
    from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown

    node = keyring.hypermedia
    ops = metadata_operations({"name": name}) + document_operations(parse_markdown(HOME_DOCUMENT).tree)
    node.publish([node.profile_blob(pair, name), *node.create(pair, pair.account_id, "", ops)])


def import_identity(keyring: Keyring, seed: bytes, label: str | None = None) -> Identity:
    """Store an existing 32-byte seed sealed. Publishes nothing.

    Raises:
        BadRequest: the seed is not 32 bytes.
        Conflict: this key (its derived secret name) is already stored.
    """
    return _store(keyring, KeyPair.from_seed(seed), label, {"importedBy": "user"})


def list_identities(keyring: Keyring) -> list[Identity]:
    """Every signing identity of the account, newest first. Never opens a seed."""
    records = keyring.secrets.list(keyring.account_id, kind=IDENTITY_KIND)
    return [_identity(r) for r in sorted(records, key=lambda r: (r.created_at, r.name), reverse=True)]


def _resolve(keyring: Keyring, ref: str) -> SecretRecord:
    """The identity a secret name, an account id or a label names (404 otherwise; 400 when a label is shared)."""
    name = ref if ref.startswith(SECRET_PREFIX) else secret_name_for(ref)
    record = keyring.secrets.find(keyring.account_id, name)
    if record is not None and not ref.startswith(SECRET_PREFIX) and record.metadata.get("accountId") != ref:
        record = None  # only the first 16 characters matched
    if record is not None and record.kind == IDENTITY_KIND:
        return record
    records = [r for r in keyring.secrets.list(keyring.account_id, kind=IDENTITY_KIND) if _identity(r).label == ref]
    if len(records) > 1:
        named = ", ".join(f"{r.name} ({r.metadata.get('accountId')})" for r in records)
        raise BadRequest(f"{len(records)} signing identities are labelled {ref!r}: {named}. Name one by account id.")
    if not records:
        raise NotFound(f"No signing identity {ref!r} (by label, account id or secret name). {_existing(keyring)}")
    return records[0]


def resolve_identity(keyring: Keyring, ref: str) -> Identity:
    """The identity `ref` names: its secret name (`hm-account-…`), its account id (`z6Mk…`) or its label.

    Raises:
        NotFound: nothing matches.
        BadRequest: several identities share that label.
    """
    return _identity(_resolve(keyring, ref))


def update_identity(keyring: Keyring, name_or_account: str, label: str | None) -> Identity:
    """Change an identity's label and republish its profile under it; the account id in its metadata is re-derived
    from the seed, as the reference does.

    Raises:
        NotFound: no such identity.
    """
    record = _resolve(keyring, name_or_account)
    pair = load_keypair(keyring, record.name)
    metadata = {**record.metadata, "kind": IDENTITY_KIND, "accountId": pair.account_id}
    metadata["label"] = _label(label, pair.account_id)
    with keyring.db.transaction():
        updated = _identity(keyring.secrets.update_metadata(keyring.account_id, record.name, metadata))
        node = keyring.hypermedia
        # The new name replaces the old one; a picture or description set with profile.update is kept.
        current = node.profile(pair.account_id) or {}
        node.publish([node.profile_blob(pair, updated.label, current.get("avatar"), current.get("description"))])
    return updated


def delete_identity(keyring: Keyring, name_or_account: str) -> bool:
    """Delete the identity's secret only; agents that name it fail validation on their next create or update.

    Raises:
        NotFound: no such identity.
    """
    record = _resolve(keyring, name_or_account)
    return keyring.secrets.delete(keyring.account_id, record.name)


def load_keypair(keyring: Keyring, secret_name: str) -> KeyPair:
    """The key pair of an identity, for signing. Opens the sealed seed.

    Raises:
        NotFound: no identity of that name.
        StorageError: the seed does not belong to the account its name says.
    """
    record = keyring.secrets.find(keyring.account_id, secret_name)
    if record is None or record.kind != IDENTITY_KIND:
        raise NotFound(f"No signing identity {secret_name!r}. {_existing(keyring)}")
    pair = KeyPair.from_seed(keyring.secrets.get_value(keyring.account_id, secret_name))
    if secret_name_for(pair.account_id) != secret_name:
        raise StorageError(f"Signing identity {secret_name!r} holds the key of another account; import it again.")
    return pair


def signing_names(definition: AgentDefinition) -> list[str]:
    """The identity names a definition grants, `signingKey` first, without duplicates."""
    return list(dict.fromkeys(k for k in (definition.signing_key, *definition.signing_keys) if k))


def identities_of(keyring: Keyring, definition: AgentDefinition) -> list[Identity]:
    """The identities an agent may sign as: those its definition names that exist, in the definition's order."""
    found: list[Identity] = []
    for name in signing_names(definition):
        record = keyring.secrets.find(keyring.account_id, name)
        if record is not None and record.kind == IDENTITY_KIND:
            found.append(_identity(record))
    return found


def check_signing_keys(keyring: Keyring, definition: AgentDefinition) -> None:
    """Every signing key a definition names must be an existing identity. Needs no master key.

    Raises:
        BadRequest: a name is unknown or names a secret that is not a signing identity.
    """
    names = signing_names(definition)
    if not names:
        return
    present = {i.name for i in identities_of(keyring, definition)}
    missing = [n for n in names if n not in present]
    if missing:
        raise BadRequest(f"Signing key not found: {', '.join(missing)}. {_existing(keyring)}")


def _existing(keyring: Keyring) -> str:
    identities = list_identities(keyring)
    if not identities:
        return f"There are no signing identities yet; create one with {_CREATE_HINT}."
    listed = ", ".join(f"{i.name} ({i.label}, {i.account_id})" for i in identities)
    return f"Signing identities: {listed}. Create another with {_CREATE_HINT}."


__all__ = [
    "IDENTITY_KIND",
    "Identity",
    "Keyring",
    "check_signing_keys",
    "create_identity",
    "delete_identity",
    "identities_of",
    "import_identity",
    "list_identities",
    "load_keypair",
    "parse_seed",
    "resolve_identity",
    "secret_name_for",
    "update_identity",
]
