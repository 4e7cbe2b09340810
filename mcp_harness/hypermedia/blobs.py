"""Signed Seed blobs (HYPERMEDIA §1): building them byte for byte as the official JS client does, and taking them in.

Everything the harness publishes to Seed is one of these: a canonical DAG-CBOR map with `type`, `signer`, `sig`
and `ts`, signed with Ed25519 over its encoding with `sig` set to 64 zero bytes. The builders below produce exactly
the bytes `@seed-hypermedia/client` produces for the same key and inputs (tests/hypermedia/test_hm_blobs.py compares
them), so a document written here is indistinguishable on the network from one written by the Seed app, and a CID
computed here names the same blob there. Where the JS client and the Go daemon disagree, the daemon wins when the JS
shape would not verify there (it re-encodes most types from a typed struct, see `blob_checks`), and the JS shape wins
otherwise.

`verify_blob` is the one way a blob from outside gets in: hash, decoding, structure, then signature.

CIDs of blobs made here use sha2-256, as the JS client's do (the Go daemon hashes its own with blake2b-256, and
`verify_blob` accepts either).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.blob_checks import check_blob, is_empty, prune
from mcp_harness.hypermedia.cbor import MAX_SAFE_INTEGER, decode, encode
from mcp_harness.hypermedia.cid import CID, DAG_CBOR, SHA2_256, cid_of
from mcp_harness.identity.keys import ED25519_PREFIX, SIGNATURE_BYTES, KeyPair, account_id, public_key_of, verify

BLAKE2B_256 = 0xB220
"""Multihash code of blake2b-256, the hash the Go daemon names its own blobs by (`bafy2bza…`)."""
ZERO_SIGNATURE = bytes(SIGNATURE_BYTES)
"""What `sig` holds while a blob is being signed or verified."""

_SIG_KEY = b"sig"
_SIG_MARKER = b"\x63sig\x58\x40"  # text(3) "sig", then the head of a 64-byte byte string
_SIG_ZEROS = _SIG_MARKER + ZERO_SIGNATURE


@dataclass(frozen=True, slots=True)
class Blob:
    """A signed blob: its CID, its exact bytes and the decoded map."""

    cid: CID
    """CIDv1 dag-cbor; sha2-256 for blobs made here, whatever hash the sender used for blobs verified."""
    data: bytes
    """The signed canonical DAG-CBOR bytes, which `cid` hashes."""
    value: dict[str, Any]
    """The decoded map: byte strings as `bytes`, links as `CID`."""

    @property
    def type(self) -> str:
        """`Change`, `Ref`, `Comment`, `Profile`, `Capability` or `Contact`."""
        return self.value["type"]

    @property
    def signer(self) -> bytes:
        """The 34-byte Ed25519 principal that signed the blob."""
        return self.value["signer"]

    @property
    def ts(self) -> int:
        """The blob's timestamp, Unix milliseconds."""
        return self.value["ts"]

    @property
    def author(self) -> str:
        """The signer's account id (`z6Mk…`)."""
        return account_id(self.signer[len(ED25519_PREFIX) :])


def now_ms() -> int:
    """The current time in whole Unix milliseconds, the only precision a blob's `ts` may have."""
    return time.time_ns() // 1_000_000


def sign_blob(key: KeyPair, unsigned: Mapping[str, Any]) -> Blob:
    """Sign a blob map: drop the fields Seed omits when empty, set `signer`, sign over the zero-`sig` encoding.

    `unsigned` needs `type` and `ts` and the type's own fields; `signer` and `sig` are set here.

    Raises:
        BadRequest: the map breaks its type's rules (see `blob_checks`).
    """
    value = prune(unsigned)
    value["signer"] = key.principal
    value["sig"] = ZERO_SIGNATURE
    check_blob(value)
    try:
        unsigned_bytes = encode(value)
    except (TypeError, ValueError) as error:
        raise BadRequest(f"{value['type']} blob cannot be encoded as DAG-CBOR: {error}.") from None
    value["sig"] = key.sign(unsigned_bytes)
    data = _with_signature(value, unsigned_bytes)
    return Blob(cid=cid_of(data), data=data, value=_as_decoded(value))


def genesis_change(key: KeyPair) -> Blob:
    """The ts-0 genesis Change `{type, signer, sig, ts: 0}` that starts a document, as JS `createGenesisChange`.

    It is the same blob for every document of one key: documents are told apart by path and Ref generation.
    """
    return sign_blob(key, {"type": "Change", "ts": 0})


def change(key: KeyPair, *, genesis: CID, deps: Sequence[CID], depth: int, ops: list[dict[str, Any]], ts: int) -> Blob:
    """A Change applying `ops` on top of `deps`, as JS `createChangeOps` + `createChange`.

    `deps` are sorted by binary CID (the daemon's order) and de-duplicated; `depth` must exceed every dep's.

    Raises:
        BadRequest: no deps, depth below 1, or an op the daemon does not know.
    """
    ordered = sorted(set(deps), key=CID.to_bytes)
    body = {"ops": ops, "opCount": len(ops)}
    return sign_blob(
        key, {"type": "Change", "genesis": genesis, "deps": ordered, "depth": depth, "body": body, "ts": ts}
    )


def ref(
    key: KeyPair,
    *,
    space: str,
    path: str,
    genesis: CID,
    heads: Sequence[CID],
    generation: int,
    ts: int,
    capability: CID | None = None,
    redirect: Mapping[str, Any] | None = None,
) -> Blob:
    """A Ref pointing `space`+`path` at `heads`, as JS `createVersionRef` (or a tombstone/redirect with no heads).

    `space` is left out when it is the signer's own account. `heads` are written as a version string lists them
    (sorted by CID string). `redirect` is `{path?, space? (account id), republish?}`; its space is left out when it
    is `space`.

    Raises:
        BadRequest: an account id is malformed, or the Ref breaks a rule (e.g. a tombstone of the home document).
    """
    space_principal = _principal(space, "Ref", "space")
    value: dict[str, Any] = {
        "type": "Ref",
        "path": path,
        "genesisBlob": genesis,
        "heads": sorted(set(heads), key=str),
        "generation": generation,
        "capability": capability,
        "ts": ts,
    }
    if space_principal != key.principal:
        value["space"] = space_principal
    if redirect is not None:
        target = dict(redirect)
        target_space = target.get("space")
        if isinstance(target_space, str):
            target_space = _principal(target_space, "Ref", "redirect.space")
        # As the daemon's NewRefRedirect: a redirect within the Ref's own space does not name it.
        target["space"] = None if target_space == space_principal else target_space
        if all(is_empty(item) for item in target.values()):
            raise BadRequest("Ref blob: field 'redirect' has no target; expected {path?, space?, republish?}.")
        value["redirect"] = target
    return sign_blob(key, value)


def comment(
    key: KeyPair,
    *,
    space: str,
    path: str,
    version: Sequence[CID],
    body: list[dict[str, Any]],
    ts: int,
    thread_root: CID | None = None,
    reply_parent: CID | None = None,
    replaces: str | None = None,
) -> Blob:
    """A Comment on `space`+`path` at `version`, as JS `createComment` (`updateComment`/`deleteComment` with
    `replaces`, the TSID of the comment replaced; `body=[]` deletes it).

    `body` is comment blocks in the published shape: block maps with attributes inlined and nested `children`.
    `space` and `path` are always written, as the JS client writes them; `version` is written as a version string
    lists its heads (sorted by CID string); `replyParent` is written whenever the comment replies, even when it is
    the thread root (a reply to a top-level comment), as the client's `createComment` writes it. (Go's daemon leaves
    it out in that case, and its reader takes either: an absent `replyParent` means the thread root.)

    Raises:
        BadRequest: the account id or path is malformed, or `reply_parent` is given without `thread_root`.
    """
    value: dict[str, Any] = {
        "type": "Comment",
        "space": _principal(space, "Comment", "space"),
        "path": path,
        "version": sorted(set(version), key=str),
        "body": body,
        "ts": ts,
        "threadRoot": thread_root,
        "replyParent": reply_parent,
        "id": replaces,
    }
    return sign_blob(key, value)


def profile(key: KeyPair, *, name: str, ts: int, avatar: str | None = None, description: str | None = None) -> Blob:
    """The signer's Profile, as JS `createProfile`. `avatar` is an `ipfs://<cid>` URI.

    Raises:
        BadRequest: no name, an avatar that is not `ipfs://<cid>`, or a description of 512 bytes or more.
    """
    return sign_blob(key, {"type": "Profile", "name": name, "avatar": avatar, "description": description, "ts": ts})


def capability(
    key: KeyPair, *, delegate: str, ts: int, role: str = "WRITER", path: str | None = None, label: str | None = None
) -> Blob:
    """A Capability granting `delegate` `role` over the signer's account (or only `path` in it), as JS
    `createCapability`.

    Raises:
        BadRequest: the delegate is not an account id, the role is not WRITER or AGENT, or an AGENT has a path.
    """
    value = {
        "type": "Capability",
        "delegate": _principal(delegate, "Capability", "delegate"),
        "role": role,
        "path": path,
        "label": label,
        "ts": ts,
    }
    return sign_blob(key, value)


def verify_blob(data: bytes, cid: CID | None = None) -> Blob:
    """Check a blob from outside: its hash against `cid`, its encoding, its structure and its signature.

    The signature is checked over the blob re-encoded with `sig` zeroed, as the daemon and the JS client check it.

    Raises:
        BadRequest: any check fails; the message names the blob type, the field and what is accepted.
    """
    data = bytes(data)
    if cid is not None:
        _check_hash(data, cid)
    value = _decoded_map(data)
    blob_type = check_blob(value)
    unsigned_bytes = encode({**value, "sig": ZERO_SIGNATURE})
    if _with_signature(value, unsigned_bytes) != data:
        raise BadRequest(
            f"{blob_type} blob: the bytes are not canonical DAG-CBOR (keys out of order or a value in a longer form "
            "than needed); expected the canonical encoding, which its CID and signature are computed over."
        )
    signer: bytes = value["signer"]
    if not verify(signer[len(ED25519_PREFIX) :], unsigned_bytes, value["sig"]):
        raise BadRequest(
            f"{blob_type} blob: field 'sig' is not a valid signature by the signer "
            f"{account_id(signer[len(ED25519_PREFIX) :])}; expected an Ed25519 signature over the blob's "
            "encoding with 'sig' set to 64 zero bytes."
        )
    return Blob(cid=cid if cid is not None else cid_of(data), data=data, value=value)


def _with_signature(value: dict[str, Any], unsigned_bytes: bytes) -> bytes:
    """The signed encoding: `unsigned_bytes` with the signature written over the 64 zeros of `sig`.

    The same bytes as encoding `value` again, for about half the cost of a blob. Canonical order puts only the
    keys that sort before `sig` (of the known ones, `id` and `ts`) ahead of it, so its offset is the length of those
    entries after a one-byte map head (a blob has fewer than 24 keys); the marker check guards the arithmetic.
    """
    before = {key: item for key, item in value.items() if _sort_key(key) < (len(_SIG_KEY), _SIG_KEY)}
    offset = len(encode(before)) + len(_SIG_MARKER)
    if len(value) < 24 and unsigned_bytes[offset - len(_SIG_MARKER) : offset + SIGNATURE_BYTES] == _SIG_ZEROS:
        return unsigned_bytes[:offset] + value["sig"] + unsigned_bytes[offset + SIGNATURE_BYTES :]
    return encode(value)


def _sort_key(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8")
    return len(encoded), encoded


def _as_decoded(value: Any) -> Any:
    """A deep copy of an encodable value as decoding its encoding gives it back (tuples as lists, integral floats as
    ints), at a quarter of the cost of decoding; the copy keeps the Blob independent of the caller's lists."""
    if isinstance(value, dict):
        return {key: _as_decoded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_decoded(item) for item in value]
    if isinstance(value, float) and value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int(value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _decoded_map(data: bytes) -> dict[str, Any]:
    try:
        value = decode(data)
    except ValueError as error:
        raise BadRequest(
            f"Blob bytes are not DAG-CBOR ({error}); expected a signed Seed blob, a DAG-CBOR map."
        ) from None
    if not isinstance(value, dict):
        raise BadRequest(
            f"Blob is a DAG-CBOR {type(value).__name__}; expected a map with 'type', 'signer', 'sig', 'ts'."
        )
    return value


def _check_hash(data: bytes, cid: CID) -> None:
    if cid.version != 1 or cid.codec != DAG_CBOR:
        raise BadRequest(f"Blob CID {cid} is not a CIDv1 of a dag-cbor block; expected 'bafy…' (codec 0x71).")
    code = cid.hash_code
    if code == SHA2_256:
        digest = hashlib.sha256(data).digest()
    elif code == BLAKE2B_256:
        digest = hashlib.blake2b(data, digest_size=32).digest()
    else:
        raise BadRequest(f"Blob CID {cid} uses multihash 0x{code:x}; expected sha2-256 (0x12) or blake2b-256 (0xb220).")
    if cid.digest != digest:
        raise BadRequest(f"Blob bytes do not hash to CID {cid}; expected the exact bytes that CID names.")


def _principal(account: str, blob_type: str, field: str) -> bytes:
    try:
        return ED25519_PREFIX + public_key_of(account)
    except BadRequest as error:
        raise BadRequest(f"{blob_type} blob: field {field!r}: {error.message}") from None


__all__ = [
    "BLAKE2B_256",
    "ZERO_SIGNATURE",
    "Blob",
    "capability",
    "change",
    "comment",
    "genesis_change",
    "now_ms",
    "profile",
    "ref",
    "sign_blob",
    "verify_blob",
]
