"""The one parser of address forms.

A verb's `address` (and an MCP resource URI) names something in the agent's world. This module turns the string
into an `Address` and back; nothing else in the package looks at address syntax. Both the `~/…` forms the
reference harness uses and the `harness://…` resource URIs are accepted and mean the same thing. Which kinds this
build serves, and how, is declared by the address spaces (spaces/registry.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

AddressKind = Literal[
    "memory",
    "self",
    "tools",
    "triggers",
    "plan",
    "thread",
    "run",
    "activity",
    "attachment",
    "ipfs",
    "hm",
    "web",
    "mcp",
]


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed address."""

    kind: AddressKind
    """Which namespace the address is in."""
    rest: str
    """What follows the namespace prefix: a memory path, a tool name, an id, or the whole URL."""
    listing: bool = False
    """True when the address names a directory or collection rather than one item."""
    raw: str = ""
    """The trimmed original text, for messages."""


_TILDE_SPACES: dict[str, AddressKind] = {"memory": "memory", "tools": "tools", "triggers": "triggers"}


def _tilde(kind: AddressKind, rest: str, raw: str) -> Address:
    if kind == "memory":
        # `~/memory` and `~/memory/` are the root; a trailing slash asks for a listing.
        return Address("memory", rest, listing=rest == "" or rest.endswith("/"), raw=raw)
    name = rest.strip("/")
    return Address(kind, name, listing=name == "", raw=raw)


def parse_address(text: str) -> Address | None:
    """Parse an address; `None` when it matches no known form.

    The caller decides which kinds it serves; this function only says what the text is.
    """
    raw = text.strip()
    if raw in ("~/self", "~/self/", "harness://self", "harness://self/"):
        return Address("self", "", raw=raw)
    if raw in ("harness://plan", "harness://plan/"):
        return Address("plan", "", raw=raw)
    for prefix in ("~/", "harness://"):
        if raw.startswith(prefix):
            body = raw[len(prefix) :]
            space, sep, rest = body.partition("/")
            kind = _TILDE_SPACES.get(space)
            if kind is None:
                return None
            if prefix == "harness://":
                rest = unquote(rest)
            return _tilde(kind, rest if sep else "", raw)
    lowered = raw.lower()
    if lowered.startswith("thread:"):
        ident = raw[len("thread:") :].strip()
        return Address("thread", ident, listing=ident == "", raw=raw)
    if lowered.startswith("run:"):
        return Address("run", raw[len("run:") :].strip(), raw=raw)
    if lowered.startswith("activity:"):
        return Address("activity", raw[len("activity:") :], raw=raw)
    if lowered.startswith("attachment:"):
        return Address("attachment", raw[len("attachment:") :], raw=raw)
    if lowered.startswith("ipfs://") or lowered.startswith("ipfs:") or _IPFS_PATH.match(raw) or _BARE_CID.match(raw):
        return Address("ipfs", raw, raw=raw)
    if lowered.startswith("hm://"):
        return Address("hm", raw, raw=raw)
    if lowered.startswith("mcp://"):
        # `mcp://<server>/<uri>`: a mounted MCP server's resource, its URI as the server spells it (issue 20).
        body = raw[len("mcp://") :]
        server, _, uri = body.partition("/")
        return Address("mcp", f"{server}/{uri}", listing=uri == "", raw=raw)
    if lowered.startswith("https://") or lowered.startswith("http://"):
        # A gateway URL (`https://<host>/ipfs/<cid>`) names content, not a page: it is read (and verified) as IPFS.
        return Address("ipfs" if _GATEWAY_URL.match(raw) else "web", raw, raw=raw)
    return None


# The shapes of a CID (CIDv1 base32 `b…`, CIDv0 `Qm…`); spaces/ipfs.py parses it exactly.
_CID_SHAPE = r"(?:b[a-z2-7]{20,}|Qm[1-9A-HJ-NP-Za-km-z]{44})"
_BARE_CID = re.compile(rf"^{_CID_SHAPE}$")
_IPFS_PATH = re.compile(rf"^/ipfs/{_CID_SHAPE}(?:[/?#].*)?$")
_GATEWAY_URL = re.compile(rf"^(?i:https?)://[^/?#]+/ipfs/{_CID_SHAPE}(?:[/?#].*)?$")


def memory_uri(path: str) -> str:
    """The MCP resource URI of a memory file or directory (`path` relative to the memory root)."""
    return "harness://memory/" + quote(path, safe="/")


def tool_uri(name: str) -> str:
    """The MCP resource URI of a tool contract."""
    return "harness://tools/" + quote(name, safe="")


def thread_uri(session_id: str) -> str:
    """The MCP resource URI of a session transcript."""
    return f"thread:{session_id}"


SELF_URI = "harness://self"
PLAN_URI = "harness://plan"
