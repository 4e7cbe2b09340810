"""`hm://` ids, document versions and TSIDs (HYPERMEDIA §1.8, §2): the names by which Seed content is addressed.

Agents paste ids copied from the Seed app, the web gateway and each other, so parsing ports the official client's
`unpackHmId` / `packHmId` (`@seed-hypermedia/client`, hm-types) rather than a generic URL parser: the same text must
name the same thing here as there, and tests/hypermedia/test_hm_ids.py checks that over a corpus against the client
itself.

Where the client is lenient about text that cannot name anything, `parse_hm_id` refuses instead, so that a typo
becomes an error rather than a read of the wrong resource: no account, an empty or non-CID version, an unreadable
block fragment, several `#`, or spaces and control characters. And where the client keeps the empty segments of a
trailing or doubled slash in `path` (which its own `id` and every path conversion then drop), `HmId.path` drops
them up front.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.cid import CID, _base58btc_encode  # pyright: ignore[reportPrivateUsage]

HM_SCHEME = "hm"
ACCEPTED_FORM = "hm://<account>/<path>[?v=<version>[&l]][#<block>[+|[start:end]]]"
"""What `parse_hm_id` accepts, quoted in its refusals (a gateway URL `https://<host>/hm/<account>/…` also works)."""

_GATEWAY_SCHEMES = ("https", "http")
# Gateway paths under /hm/ that are app pages, not accounts (hm-types STATIC_HM_PATHS).
_STATIC_HM_PATHS = frozenset({"download", "connect", "register", "profile", "contact"})
_FRAGMENT = re.compile(r"([^+\[]+)(?:(\+)|\[([0-9]+):([0-9]+)\])?")  # [0-9]: JS \d is ASCII-only
_UNSAFE = re.compile(r"[\x00-\x20\x7f]")
_TSID_TIMESTAMP_BYTES = 6
_TSID_HASH_BYTES = 4


@dataclass(frozen=True, slots=True)
class HmId:
    """A parsed `hm://` id: an account, a path in it, and optionally a version, a block and a range within it."""

    uid: str
    """The account id (`z6Mk…`) that owns the resource."""
    path: tuple[str, ...]
    """Path segments below the account, without empty ones; `()` is the account's home document. View terms such
    as `:directory` or `:comments` stay in as given, for the caller to interpret."""
    version: str | None = None
    """A version string: head Change CIDs joined by `.`; None for the latest."""
    latest: bool = True
    """Follow the latest version; set unless a version is given without `&l`."""
    block_ref: str | None = None
    """The id of a block inside the document (the `#` fragment)."""
    block_range: tuple[int, int] | None = None
    """A code-point range `[start:end]` within the block's text."""
    expanded: bool = False
    """`#<block>+`: the block with its children expanded."""
    hostname: str | None = None
    """The gateway host, when the id came from an `https://<host>/hm/…` URL."""
    scheme: str = HM_SCHEME
    """`hm`, or `https`/`http` for a gateway URL."""

    @property
    def id(self) -> str:
        """The resource's base id, `hm://<uid>/<p1>/<p2>`: no version, no fragment, whatever scheme it came in."""
        return _base_id(self.uid, self.path)

    @property
    def path_string(self) -> str:
        """The path as Seed stores it on Refs and Comments: `"/a/b"`, or `""` for the home document."""
        return "/" + "/".join(self.path) if self.path else ""


def parse_hm_id(text: str) -> HmId:
    """Parse an `hm://` id or a gateway URL `https://<host>/hm/<account>/<path>`, as the Seed client's `unpackHmId`.

    Raises:
        BadRequest: the text is not such an id; the message quotes the accepted form.
    """

    def refuse(reason: str) -> BadRequest:
        return BadRequest(f"Not an hm:// id: {text!r} ({reason}). Expected {ACCEPTED_FORM}.")

    if not isinstance(text, str) or not text:
        raise BadRequest(f"An hm:// id must be a non-empty string. Expected {ACCEPTED_FORM}.")
    if _UNSAFE.search(text):
        raise refuse("it contains spaces or control characters")
    # Split as the client does (JS String.split keeps only the first two parts of each split).
    pieces = text.split("://")
    if len(pieces) < 2 or not pieces[1]:
        raise refuse("no '<scheme>://' prefix")
    scheme, rest = pieces[0], pieces[1]
    if rest.count("#") > 1:
        raise refuse("more than one '#'")
    path_and_query, _, fragment = rest.partition("#")
    # As the client, only the text between the first and a second '?' is the query.
    path_text, *queries = path_and_query.split("?")
    query_text = queries[0] if queries else ""
    segments = path_text.split("/")

    hostname: str | None = None
    if scheme == HM_SCHEME:
        uid, path = segments[0], segments[1:]
    elif scheme in _GATEWAY_SCHEMES:
        if len(segments) < 2 or segments[1] != "hm":
            raise refuse(f"a {scheme}:// URL must be a gateway link, {scheme}://<host>/hm/<account>/<path>")
        hostname = segments[0] or None
        uid = segments[2] if len(segments) > 2 else ""
        if uid in _STATIC_HM_PATHS:
            raise refuse(f"/hm/{uid} is a page of the Seed app, not an account")
        path = segments[3:]
    else:
        raise refuse(f"scheme {scheme!r} is not hm (or https for a gateway link)")
    if not uid:
        raise refuse("no account after the scheme")

    # URLSearchParams: later duplicates win, '+' is a space, percent escapes are decoded.
    query = dict(parse_qsl(query_text, keep_blank_values=True))
    version = query.get("v") or None
    if version is not None:
        try:
            parse_version(version)
        except BadRequest as error:
            raise refuse(f"v={version!r} is not a version: {error.message}") from None
    latest = query.get("l") == "" or version is None

    block_ref: str | None = None
    block_range: tuple[int, int] | None = None
    expanded = False
    if fragment:
        parsed = parse_fragment(fragment)
        if parsed is None:
            raise refuse(f"fragment #{fragment} is not <block>, <block>+ or <block>[start:end]")
        block_ref, block_range, expanded = parsed

    return HmId(
        uid=uid,
        path=tuple(segment for segment in path if segment),
        version=version,
        latest=latest,
        block_ref=block_ref,
        block_range=block_range,
        expanded=expanded,
        hostname=hostname,
        scheme=scheme,
    )


def parse_fragment(fragment: str) -> tuple[str, tuple[int, int] | None, bool] | None:
    """A block fragment (`<block>`, `<block>+`, `<block>[start:end]`) as (block id, code-point range, expanded);
    None when it is none of those (the client's `parseFragment`)."""
    match = _FRAGMENT.fullmatch(fragment)
    if match is None:
        return None
    block_range = (int(match.group(3)), int(match.group(4))) if match.group(3) is not None else None
    return match.group(1), block_range, match.group(2) == "+"


def pack_hm_id(hm: HmId) -> str:
    """The `hm://` text of an id, as the Seed client's `packHmId`: always the hm scheme, `l` only with a version.

    Raises:
        BadRequest: the id has no account.
    """
    if not hm.uid:
        raise BadRequest(f"An hm:// id needs an account to be packed. Expected {ACCEPTED_FORM}.")
    text = _base_id(hm.uid, hm.path)
    if hm.version:
        text += f"?v={hm.version}&l" if hm.latest else f"?v={hm.version}"
    if hm.block_ref:
        text += "#" + hm.block_ref
        # The client checks `expanded` before the range, so an id carrying both packs as expanded.
        if hm.expanded:
            text += "+"
        elif hm.block_range is not None:
            text += f"[{hm.block_range[0]}:{hm.block_range[1]}]"
    return text


def tsid(ts_ms: int, data: bytes) -> str:
    """The TSID of a blob (HYPERMEDIA §1.8): the name Comments and Contacts keep across edits.

    10 bytes, the 6-byte big-endian millisecond timestamp then the first 4 bytes of sha256(data), in multibase
    base58btc (`z…`).

    Raises:
        BadRequest: the timestamp is negative or does not fit 6 bytes.
    """
    if not 0 <= ts_ms < 1 << (8 * _TSID_TIMESTAMP_BYTES):
        raise BadRequest(f"A TSID timestamp must be whole milliseconds in [0, 2**48), not {ts_ms!r}.")
    raw = ts_ms.to_bytes(_TSID_TIMESTAMP_BYTES, "big") + hashlib.sha256(data).digest()[:_TSID_HASH_BYTES]
    return "z" + _base58btc_encode(raw)


def version_string(cids: Iterable[CID | str]) -> str:
    """A document version: the distinct head CIDs as strings, sorted lexicographically and joined by `.`."""
    return ".".join(sorted({str(cid) for cid in cids}))


def parse_version(text: str) -> list[CID]:
    """The head CIDs of a version string, in the order written.

    Raises:
        BadRequest: the text is empty or a part is not a CID.
    """
    if not text:
        raise BadRequest("A version must name at least one Change CID; expected '<cid>[.<cid>…]'.")
    heads: list[CID] = []
    for part in text.split("."):
        try:
            heads.append(CID.parse(part))
        except ValueError as error:
            raise BadRequest(
                f"Version part {part!r} is not a CID ({error}); expected Change CIDs joined by '.', e.g. 'bafyrei…'."
            ) from None
    return heads


def _base_id(uid: str, path: Iterable[str]) -> str:
    segments = [segment for segment in path if segment]
    return f"{HM_SCHEME}://{uid}" + ("/" + "/".join(segments) if segments else "")


__all__ = ["ACCEPTED_FORM", "HmId", "pack_hm_id", "parse_hm_id", "parse_version", "tsid", "version_string"]
