"""The structural rules of signed Seed blobs (HYPERMEDIA §1.2–1.7), shared by building and ingesting them.

A blob that breaks these rules is one the Seed daemon would refuse or misread, so `blobs.sign_blob` refuses to
make one and `blobs.verify_blob` refuses to take one in. Two kinds of rule matter:

- **what Go can decode**: the daemon decodes each blob into a typed struct, strictly, so every field must have the
  type of its struct field and unknown top-level keys fail;
- **what Go re-encodes**: for Change, Ref, Profile, Capability and Contact the daemon verifies the signature over
  its re-encoding of that struct, which leaves out every empty `omitempty` field. A blob carrying one (`deps: []`,
  `path: ""`) decodes but can never verify there, so it is refused here too, and `prune` drops such fields before
  anything is signed. Comments are verified over the generic map instead, so their empty fields are left alone.

Then the indexing invariants the daemon checks before it uses a blob: a Change is a genesis (no genesis, deps or
depth) or not (all three); a Ref names its genesis; a Profile without an alias has a name; and so on.

Every refusal is a `BadRequest` naming the blob type, the field, what was wrong and what is accepted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, TypeVar

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.cbor import MAX_SAFE_INTEGER
from mcp_harness.hypermedia.cid import CID
from mcp_harness.identity.keys import ED25519_PREFIX, PUBLIC_KEY_BYTES, SIGNATURE_BYTES

BLOB_TYPES = ("Change", "Ref", "Comment", "Profile", "Capability", "Contact")
"""The signed blob types the harness builds and ingests."""
OP_TYPES = ("SetKey", "SetAttributes", "MoveBlocks", "ReplaceBlock", "DeleteBlocks")
ROLES = ("WRITER", "AGENT")
PRIVATE = "Private"
"""The one non-empty `visibility` (HYPERMEDIA §1.3); public is the field left out."""

_COMMON = frozenset({"type", "signer", "sig", "ts"})
KNOWN_KEYS: dict[str, frozenset[str]] = {
    "Change": _COMMON | {"genesis", "deps", "depth", "body"},
    "Ref": _COMMON | {"space", "path", "genesisBlob", "capability", "heads", "redirect", "generation", "visibility"},
    "Comment": _COMMON
    | {"id", "capability", "account", "space", "path", "version", "threadRoot", "replyParent", "body", "visibility"},
    "Profile": _COMMON | {"alias", "name", "avatar", "description", "account"},
    "Capability": _COMMON | {"delegate", "audience", "path", "role", "label"},
    "Contact": _COMMON | {"id", "account", "subject", "name", "subscribe"},
}
"""Top-level keys of each type's Go struct; any other key fails the daemon's strict decode."""

OMIT_EMPTY: dict[str, frozenset[str]] = {
    "Change": frozenset({"genesis", "deps", "depth", "body"}),
    "Ref": frozenset({"space", "path", "genesisBlob", "capability", "redirect", "generation", "visibility"}),
    # Go omits more on Comments (path, space), but the JS client always writes them and a Comment is verified over
    # the map as sent, so both shapes are valid; these are what no client writes empty.
    "Comment": frozenset({"id", "capability", "account", "version", "threadRoot", "replyParent", "visibility"}),
    "Profile": frozenset({"alias", "name", "avatar", "description", "account"}),
    "Capability": frozenset({"audience", "path", "role", "label"}),
    "Contact": frozenset({"id", "account", "subject", "name", "subscribe"}),
}
"""Fields Seed leaves out when empty (Go's `omitempty`); `heads`, `delegate` and Comment `body` are always written."""

_NESTED_OMIT_EMPTY = {
    ("Change", "body"): frozenset({"opCount", "ops"}),
    ("Ref", "redirect"): frozenset({"space", "path", "republish"}),
    ("Contact", "subscribe"): frozenset({"site", "profile"}),
}
_TYPED_REENCODING = frozenset({"Change", "Ref", "Profile", "Capability", "Contact"})

_T = TypeVar("_T")
_MAX_INT64 = 2**63 - 1
_P256_PREFIX = b"\x80\x24"  # unsigned-varint multicodec 0x1200 (p256-pub), a compressed 33-byte key follows
_P256_PRINCIPAL_BYTES = 2 + 33
_ED25519_PRINCIPAL_BYTES = len(ED25519_PREFIX) + PUBLIC_KEY_BYTES
_PROFILE_DESCRIPTION_LIMIT = 512
_CAPABILITY_LABEL_LIMIT = 512
_CONTACT_NAME_LIMIT = 256
_ED25519_FORM = f"{_ED25519_PRINCIPAL_BYTES} bytes: 0xed 0x01 then the Ed25519 public key"
_PRINCIPAL_FORM = f"a principal ({_ED25519_FORM}; or 0x80 0x24 then a compressed P-256 key)"
_PATH_FORM = "'' for the home document, or segments each after a '/', not ending with '/', without quotes"


def is_empty(value: object) -> bool:
    """Whether Go's `omitempty` would leave a value out: None, False, 0, and empty strings, bytes, lists and maps."""
    if value is None or value is False:
        return True
    if isinstance(value, CID):
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value == 0
    if isinstance(value, str | bytes | bytearray | list | tuple | dict):
        return len(value) == 0
    return False


def prune(value: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an unsigned blob map without the fields Seed omits when empty, and without None anywhere on top."""
    blob_type = value.get("type")
    omit = OMIT_EMPTY.get(blob_type, frozenset()) if isinstance(blob_type, str) else frozenset()
    out: dict[str, Any] = {}
    for key, item in value.items():
        nested = _NESTED_OMIT_EMPTY.get((blob_type, key)) if isinstance(blob_type, str) else None
        if nested is not None and isinstance(item, Mapping):
            item = {k: v for k, v in item.items() if v is not None and not (k in nested and is_empty(v))}
        if item is None or (key in omit and is_empty(item)):
            continue
        out[key] = item
    return out


def check_blob(value: dict[str, Any]) -> str:
    """Check a blob map (signed or with a zeroed `sig`) against its type's rules; return its type.

    Raises:
        BadRequest: the map breaks a rule; the message names the type, the field and what is accepted.
    """
    blob_type = value.get("type")
    if not isinstance(blob_type, str) or blob_type not in KNOWN_KEYS:
        raise BadRequest(
            f"Blob field 'type' is {blob_type!r}; expected one of {', '.join(BLOB_TYPES)} (a signed Seed blob)."
        )
    unknown = sorted(set(value) - KNOWN_KEYS[blob_type])
    if unknown:
        raise _bad(
            blob_type, unknown[0], "is not a field of this type", f"only {', '.join(sorted(KNOWN_KEYS[blob_type]))}"
        )
    signer = value.get("signer")
    if not isinstance(signer, bytes) or len(signer) != _ED25519_PRINCIPAL_BYTES:
        raise _bad(blob_type, "signer", f"is {_describe(signer)}", _ED25519_FORM)
    if not signer.startswith(ED25519_PREFIX):
        raise _bad(blob_type, "signer", "is not an Ed25519 principal", _ED25519_FORM)
    sig = value.get("sig")
    if not isinstance(sig, bytes) or len(sig) != SIGNATURE_BYTES:
        raise _bad(blob_type, "sig", f"is {_describe(sig)}", f"{SIGNATURE_BYTES} bytes of Ed25519 signature")
    ts = value.get("ts")
    if not _is_int(ts) or not 0 <= ts <= _MAX_INT64:
        raise _bad(blob_type, "ts", f"is {_describe(ts)}", "a whole number of Unix milliseconds, 0 or more")
    if blob_type in _TYPED_REENCODING:
        for key in OMIT_EMPTY[blob_type]:
            if key in value and is_empty(value[key]):
                raise _bad(
                    blob_type,
                    key,
                    f"is present but empty ({value[key]!r}), so the daemon's re-encoding (which omits it) would not "
                    "match the signature",
                    "the field left out",
                )
    _CHECKS[blob_type](value)
    return blob_type


# --- per type -------------------------------------------------------------------------------------------------------


def _check_change(value: dict[str, Any]) -> None:
    genesis = _optional(value, "Change", "genesis", CID, "a CID of the document's genesis Change")
    deps = _cid_list(value, "Change", "deps")
    depth = value.get("depth", 0)
    if not _is_int(depth) or not 0 <= depth <= _MAX_INT64:
        raise _bad("Change", "depth", f"is {_describe(depth)}", "a non-negative integer")
    is_genesis = genesis is None and not deps and depth == 0
    if not is_genesis and (genesis is None or not deps or depth <= 0):
        raise _bad(
            "Change",
            "genesis/deps/depth",
            f"break the causality invariant (genesis {'set' if genesis else 'absent'}, {len(deps)} deps, depth "
            f"{depth})",
            "either none of them (a genesis Change) or all three: genesis, at least one dep, depth > 0",
        )
    if "body" not in value:
        return
    body = value["body"]
    if not isinstance(body, dict):
        raise _bad("Change", "body", f"is {_describe(body)}", "a map {ops, opCount}")
    extra = sorted(set(body) - {"ops", "opCount"})
    if extra:
        raise _bad("Change", f"body.{extra[0]}", "is not a field of a Change body", "only 'ops' and 'opCount'")
    for key in _NESTED_OMIT_EMPTY[("Change", "body")]:
        if key in body and is_empty(body[key]):
            raise _bad("Change", f"body.{key}", "is present but empty", "the field left out (Go omits it)")
    op_count = body.get("opCount", 0)
    if not _is_int(op_count) or op_count < 0:
        raise _bad("Change", "body.opCount", f"is {_describe(op_count)}", "a non-negative integer")
    ops = body.get("ops", [])
    if not isinstance(ops, list | tuple):
        raise _bad("Change", "body.ops", f"is {_describe(ops)}", "a list of op maps")
    for index, op in enumerate(ops):
        _check_op(op, f"body.ops[{index}]")


_OP_KEYS = {
    "SetKey": frozenset({"type", "key", "value"}),
    "SetAttributes": frozenset({"type", "block", "attrs"}),
    "MoveBlocks": frozenset({"type", "parent", "blocks", "ref"}),
    "ReplaceBlock": frozenset({"type", "block"}),
    "DeleteBlocks": frozenset({"type", "blocks"}),
}


def _check_op(op: object, where: str) -> None:
    if not isinstance(op, dict):
        raise _bad("Change", where, f"is {_describe(op)}", "an op map with a 'type'")
    op_type = op.get("type")
    if op_type not in _OP_KEYS:
        raise _bad("Change", f"{where}.type", f"is {op_type!r}", f"one of {', '.join(OP_TYPES)}")
    extra = sorted(set(op) - _OP_KEYS[op_type])
    if extra:
        raise _bad("Change", f"{where}.{extra[0]}", f"is not a field of a {op_type} op", ", ".join(_OP_KEYS[op_type]))
    if op_type == "ReplaceBlock":
        block = op.get("block")
        if not isinstance(block, dict) or not isinstance(block.get("id") or block.get("iD"), str):
            raise _bad("Change", f"{where}.block", f"is {_describe(block)}", "a block map with a string 'id'")
    elif op_type in ("MoveBlocks", "DeleteBlocks"):
        blocks = op.get("blocks")
        if not isinstance(blocks, list | tuple) or not all(isinstance(b, str) for b in blocks):
            raise _bad("Change", f"{where}.blocks", f"is {_describe(blocks)}", "a list of block ids")
        if not isinstance(op.get("parent", ""), str):
            raise _bad("Change", f"{where}.parent", f"is {_describe(op['parent'])}", "a block id ('' for the root)")
        ref = op.get("ref", [])
        if not isinstance(ref, list | tuple) or not all(_is_int(n) and n >= 0 for n in ref):
            raise _bad("Change", f"{where}.ref", f"is {_describe(ref)}", "an RGA op id: a list of unsigned integers")
    elif op_type == "SetAttributes":
        attrs = op.get("attrs", [])
        if not isinstance(op.get("block", ""), str) or not isinstance(attrs, list | tuple):
            raise _bad("Change", where, "has a non-string 'block' or non-list 'attrs'", "{block?: str, attrs: [...]}")
        for index, pair in enumerate(attrs):
            _check_attribute(pair, f"{where}.attrs[{index}]")
    elif not isinstance(op.get("key"), str):
        raise _bad("Change", f"{where}.key", f"is {_describe(op.get('key'))}", "a metadata key string")


def _check_attribute(pair: object, where: str) -> None:
    if not isinstance(pair, dict) or set(pair) - {"key", "value"}:
        raise _bad("Change", where, f"is {_describe(pair)}", "a map {key: [str, …], value}")
    key = pair.get("key", [])
    if not isinstance(key, list | tuple) or not all(isinstance(k, str) for k in key):
        raise _bad("Change", f"{where}.key", f"is {_describe(key)}", "a list of strings (the attribute's path)")
    item = pair.get("value")
    if _is_int(item) and abs(item) > MAX_SAFE_INTEGER:
        raise _bad("Change", f"{where}.value", f"is {item}, beyond JavaScript's safe integers", "|value| <= 2**53-1")
    if not (item is None or isinstance(item, str | bool | int | float)):
        raise _bad("Change", f"{where}.value", f"is {_describe(item)}", "a string, number, boolean or null")


def _check_ref(value: dict[str, Any]) -> None:
    _optional_principal(value, "Ref", "space")
    path = _path(value, "Ref", "path")
    if _optional(value, "Ref", "genesisBlob", CID, "the CID of the document's genesis Change") is None:
        raise _bad("Ref", "genesisBlob", "is missing", "the CID of the document's genesis Change")
    _optional(value, "Ref", "capability", CID, "the CID of the Capability that lets the signer write here")
    if "heads" not in value:
        raise _bad("Ref", "heads", "is missing", "a list of head Change CIDs ([] for a tombstone or redirect)")
    heads = _cid_list(value, "Ref", "heads")
    generation = value.get("generation", 0)
    if not _is_int(generation) or abs(generation) > _MAX_INT64:
        raise _bad("Ref", "generation", f"is {_describe(generation)}", "a 64-bit integer")
    visibility = _optional(value, "Ref", "visibility", str, f"{PRIVATE!r} (or the field left out for public)")
    if visibility is not None and visibility != PRIVATE:
        raise _bad("Ref", "visibility", f"is {visibility!r}", f"{PRIVATE!r} (or the field left out for public)")
    redirect = value.get("redirect")
    if redirect is not None:
        if not isinstance(redirect, dict):
            raise _bad("Ref", "redirect", f"is {_describe(redirect)}", "a map {space?, path?, republish?}")
        extra = sorted(set(redirect) - {"space", "path", "republish"})
        if extra:
            raise _bad("Ref", f"redirect.{extra[0]}", "is not a field of a redirect", "space, path, republish")
        for key in ("space", "path", "republish"):
            if key in redirect and is_empty(redirect[key]):
                raise _bad("Ref", f"redirect.{key}", "is present but empty", "the field left out (Go omits it)")
        _optional_principal(redirect, "Ref", "space", "redirect.space")
        _path(redirect, "Ref", "path", "redirect.path")
        if not isinstance(redirect.get("republish", False), bool):
            raise _bad("Ref", "redirect.republish", f"is {_describe(redirect['republish'])}", "a boolean")
    # The daemon allows neither a tombstone nor a redirect for an account's home document.
    if path == "" and redirect is not None:
        raise _bad("Ref", "redirect", "is set on the home document (path '')", "no redirect for path ''")
    if path == "" and not heads:
        raise _bad("Ref", "heads", "is empty on the home document (path '')", "at least one head for path ''")
    if visibility == PRIVATE and (not path or path.count("/") != 1):
        raise _bad("Ref", "path", f"is {path!r} on a private Ref", "a single segment, '/name'")


def _check_comment(value: dict[str, Any]) -> None:
    _optional(value, "Comment", "id", str, "the TSID of the comment this one replaces")
    _optional(value, "Comment", "capability", CID, "a Capability CID")
    _optional_principal(value, "Comment", "account")
    _optional_principal(value, "Comment", "space")
    _path(value, "Comment", "path")
    _cid_list(value, "Comment", "version")
    thread_root = _optional(value, "Comment", "threadRoot", CID, "the CID of the thread's first comment")
    reply_parent = _optional(value, "Comment", "replyParent", CID, "the CID of the comment replied to")
    if reply_parent is not None and thread_root is None:
        raise _bad("Comment", "threadRoot", "is missing while 'replyParent' is set", "the thread's root comment CID")
    visibility = _optional(value, "Comment", "visibility", str, f"{PRIVATE!r} or ''")
    if visibility not in (None, "", PRIVATE):
        raise _bad("Comment", "visibility", f"is {visibility!r}", f"{PRIVATE!r} or ''")
    if "body" not in value:
        raise _bad("Comment", "body", "is missing", "a list of comment blocks ([] for a deleted comment)")
    _check_comment_blocks(value["body"], "body")


def _check_comment_blocks(blocks: object, where: str) -> None:
    if not isinstance(blocks, list | tuple):
        raise _bad("Comment", where, f"is {_describe(blocks)}", "a list of block maps")
    for index, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise _bad("Comment", f"{where}[{index}]", f"is {_describe(block)}", "a block map")
        if "children" in block:
            _check_comment_blocks(block["children"], f"{where}[{index}].children")


def _check_profile(value: dict[str, Any]) -> None:
    alias = _optional_principal(value, "Profile", "alias")
    _optional_principal(value, "Profile", "account")
    name = _optional(value, "Profile", "name", str, "the profile's display name")
    avatar = _optional(value, "Profile", "avatar", str, "an 'ipfs://<cid>' URI")
    description = _optional(value, "Profile", "description", str, "a short text")
    if alias is not None:
        present = [key for key in ("name", "avatar", "description", "account") if key in value]
        if present:
            raise _bad("Profile", present[0], "is set on an alias Profile", "only 'alias' (the identity redirect)")
        return
    if name is None:
        raise _bad("Profile", "name", "is missing", "a non-empty name (required unless 'alias' is set)")
    if avatar is not None:
        scheme, _, rest = avatar.partition("://")
        host = rest.split("/", 1)[0]
        try:
            if scheme != "ipfs":
                raise ValueError(scheme)
            CID.parse(host)
        except ValueError:
            raise _bad("Profile", "avatar", f"is {avatar!r}", "an 'ipfs://<cid>' URI") from None
    if description is not None and len(description.encode("utf-8")) >= _PROFILE_DESCRIPTION_LIMIT:
        raise _bad(
            "Profile",
            "description",
            f"is {len(description.encode('utf-8'))} bytes",
            f"fewer than {_PROFILE_DESCRIPTION_LIMIT} bytes of UTF-8",
        )


def _check_capability(value: dict[str, Any]) -> None:
    if _optional_principal(value, "Capability", "delegate") is None:
        raise _bad("Capability", "delegate", "is missing", _PRINCIPAL_FORM)
    _optional_principal(value, "Capability", "audience")
    path = _path(value, "Capability", "path")
    role = _optional(value, "Capability", "role", str, " or ".join(ROLES))
    if role is not None and role not in ROLES:
        raise _bad("Capability", "role", f"is {role!r}", " or ".join(ROLES))
    if role == "AGENT" and path:
        raise _bad("Capability", "path", f"is {path!r} on an AGENT capability", "no path (AGENT covers the account)")
    label = _optional(value, "Capability", "label", str, "a short label")
    if label is not None:
        if len(label.encode("utf-8")) > _CAPABILITY_LABEL_LIMIT:
            raise _bad("Capability", "label", "is too long", f"at most {_CAPABILITY_LABEL_LIMIT} bytes of UTF-8")
        if label.strip() != label:
            raise _bad("Capability", "label", f"is {label!r}", "no leading or trailing whitespace")


def _check_contact(value: dict[str, Any]) -> None:
    _optional(value, "Contact", "id", str, "the TSID of the contact this one replaces")
    _optional_principal(value, "Contact", "account")
    _optional_principal(value, "Contact", "subject")
    name = _optional(value, "Contact", "name", str, "the contact's name")
    if name is not None and len(name.encode("utf-8")) > _CONTACT_NAME_LIMIT:
        raise _bad("Contact", "name", "is too long", f"at most {_CONTACT_NAME_LIMIT} bytes of UTF-8")
    subscribe = value.get("subscribe")
    if subscribe is not None:
        if not isinstance(subscribe, dict) or set(subscribe) - {"site", "profile"}:
            raise _bad("Contact", "subscribe", f"is {_describe(subscribe)}", "a map {site?: bool, profile?: bool}")
        for key, flag in subscribe.items():
            if flag is not True:
                raise _bad("Contact", f"subscribe.{key}", f"is {flag!r}", "true (false is the field left out)")


_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "Change": _check_change,
    "Ref": _check_ref,
    "Comment": _check_comment,
    "Profile": _check_profile,
    "Capability": _check_capability,
    "Contact": _check_contact,
}


# --- field helpers --------------------------------------------------------------------------------------------------


def _bad(blob_type: str, field: str, problem: str, accepted: str) -> BadRequest:
    return BadRequest(f"{blob_type} blob: field {field!r} {problem}; expected {accepted}.")


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _describe(value: object) -> str:
    if isinstance(value, bytes):
        return f"{len(value)} bytes"
    if value is None:
        return "missing"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _optional(value: Mapping[str, Any], blob_type: str, key: str, kind: type[_T], accepted: str) -> _T | None:
    if key not in value:
        return None
    item = value[key]
    if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
        raise _bad(blob_type, key, f"is {_describe(item)}", accepted)
    return item


def _optional_principal(value: Mapping[str, Any], blob_type: str, key: str, field: str | None = None) -> bytes | None:
    if key not in value:
        return None
    item = value[key]
    if isinstance(item, bytes) and (
        (len(item) == _ED25519_PRINCIPAL_BYTES and item.startswith(ED25519_PREFIX))
        or (len(item) == _P256_PRINCIPAL_BYTES and item.startswith(_P256_PREFIX))
    ):
        return item
    raise _bad(blob_type, field or key, f"is {_describe(item)}", _PRINCIPAL_FORM)


def _cid_list(value: Mapping[str, Any], blob_type: str, key: str) -> list[CID]:
    items = value.get(key, [])
    if not isinstance(items, list | tuple) or not all(isinstance(item, CID) for item in items):
        raise _bad(blob_type, key, f"is {_describe(items)}", "a list of CIDs")
    return list(items)


def _path(value: Mapping[str, Any], blob_type: str, key: str, field: str | None = None) -> str:
    """A path as the daemon's `NewIRI` takes it (HYPERMEDIA §1.3); returns `""` when absent."""
    path = value.get(key, "")
    field = field or key
    if not isinstance(path, str):
        raise _bad(blob_type, field, f"is {_describe(path)}", _PATH_FORM)
    if path and (not path.startswith("/") or path.endswith("/")):
        raise _bad(blob_type, field, f"is {path!r}", _PATH_FORM)
    if any(char in "\"'" or ord(char) < 0x20 or ord(char) == 0x7F for char in path):
        raise _bad(blob_type, field, f"is {path!r}, with a quote or control character", _PATH_FORM)
    return path


__all__ = ["BLOB_TYPES", "KNOWN_KEYS", "OMIT_EMPTY", "OP_TYPES", "PRIVATE", "ROLES", "check_blob", "is_empty", "prune"]
