"""Seed's `.hmkey.json` key files: what the Seed desktop app, its daemon (`ExportKey` / `ImportKey`) and
`seed-cli key export` write and read, so an identity moves between them and the harness unchanged.

The unencrypted form (`@seed-hypermedia/client/keyfile.ts`, `backend/api/daemon/v1alpha/daemon.go`):

```json
{
  "createTime": "2026-01-02T03:04:05.678Z",
  "publicKey": "z6Mk…",
  "keyB64": "<base64url without padding of the 32-byte Ed25519 seed>",
  "profile": {"name": "…"}
}
```

two-space indented with a trailing newline. `profile` is optional (the TypeScript writer adds it, the Go one does
not). A file with `encryption` holds the seed under argon2id (parallelism 4) and XChaCha20-Poly1305; libsodium's
argon2id runs with parallelism 1 only, so such a file is refused with advice rather than half-supported.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.identity.keys import SEED_BYTES, KeyPair

SUFFIX = ".hmkey.json"
MAX_FILE_BYTES = 1 << 20
"""The daemon's import limit."""


def looks_like_keyfile(data: bytes) -> bool:
    return data.lstrip()[:1] == b"{"


def write_keyfile(pair: KeyPair, label: str | None = None) -> bytes:
    """The unencrypted `.hmkey.json` bytes of a key pair (the seed in clear: write them only to a 0600 file)."""
    payload: dict[str, Any] = {
        "createTime": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "publicKey": pair.account_id,
        "keyB64": base64.urlsafe_b64encode(pair.seed).rstrip(b"=").decode("ascii"),
    }
    if label:
        payload["profile"] = {"name": label}
    return (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_keyfile(data: bytes) -> tuple[bytes, str | None]:
    """The seed and profile name (if any) of an unencrypted `.hmkey.json` file, checked against its `publicKey`.

    Raises:
        BadRequest: not such a file, an encrypted one, or a key that does not match its account (never quoting
        the key).
    """
    where = "The .hmkey.json key file"
    if len(data) > MAX_FILE_BYTES:
        raise BadRequest(f"{where} is larger than {MAX_FILE_BYTES} bytes.")
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"{where} is not valid JSON ({type(exc).__name__}).") from None
    if not isinstance(payload, dict):
        raise BadRequest(f"{where} must be a JSON object with publicKey and keyB64.")
    fields: dict[str, Any] = payload  # pyright: ignore[reportUnknownVariableType]
    if fields.get("encryption"):
        raise BadRequest(
            f"{where} is password-encrypted, which this harness cannot open; export it again without a password "
            "(Seed desktop: export without a password; `seed-cli key export` without --password)."
        )
    key = fields.get("keyB64")
    if not isinstance(key, str) or not key:
        raise BadRequest(f"{where} has no keyB64 (the base64url Ed25519 seed).")
    try:
        seed = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
    except (binascii.Error, ValueError):
        raise BadRequest(f"{where} has a keyB64 that is not base64url.") from None
    if len(seed) != SEED_BYTES:
        raise BadRequest(f"{where} holds a {len(seed)}-byte key; an Ed25519 seed is {SEED_BYTES} bytes.")
    account = KeyPair.from_seed(seed).account_id
    declared = fields.get("publicKey")
    if declared and declared != account:
        raise BadRequest(f"{where} says publicKey {declared!r}, but its key belongs to {account}.")
    profile = fields.get("profile")
    name = profile.get("name") if isinstance(profile, dict) else None  # pyright: ignore[reportUnknownMemberType]
    return seed, name if isinstance(name, str) and name.strip() else None
