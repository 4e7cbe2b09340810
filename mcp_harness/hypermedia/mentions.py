"""The `hm://` links in Seed blocks, found structurally, and which of them @-mention an account.

As the Seed daemon indexes them (`indexURL`, `backend/blob/index.go`): a block's own `link` (an Embed block, a
Button) and the `link` of each of its annotations (a Link, or the inline Embed an @mention is), in Change ops and
in comment bodies alike. Text is never searched: "@alice" mentions nobody, a link to `hm://<alice's account>` (or
its `:profile`) mentions Alice, a link to one of her documents cites that document.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.ids import HmId, parse_hm_id


def canonical(text: str) -> str:
    """`hm://uid/path` of an id: no version, no fragment, no view terms, no trailing slash.

    Raises:
        BadRequest: not an hm:// id.
    """
    found = parse_hm_id(text)
    return "hm://" + found.uid + "".join(f"/{s}" for s in found.path if not s.startswith(":"))


def mentioned_account(link: str) -> str | None:
    """The account an `hm://` link @-mentions: `hm://<uid>` or `hm://<uid>/:profile` (a document is cited, not
    mentioned), as the reference harness's `mentionedAccountFromLink`."""
    try:
        found = parse_hm_id(link)
    except BadRequest:
        return None
    if found.scheme != "hm" or found.path not in ((), (":profile",)):
        return None
    return found.uid


@dataclass(frozen=True, slots=True)
class Link:
    block: str
    kind: str
    """The block type for a block link (Embed, Button), the annotation type (Link, Embed) for an inline one."""
    target: HmId


def links_in(blocks: Sequence[Mapping[str, Any]]) -> Iterator[Link]:
    """The `hm://` links of op-shape block maps (and their nested `children`, as comment bodies carry them)."""
    for block in blocks:
        block_id = str(block.get("id") or block.get("iD") or "")
        candidates = [(str(block.get("type") or ""), block.get("link"))]
        for annotation in block.get("annotations") or ():
            if isinstance(annotation, Mapping):
                candidates.append((str(annotation.get("type") or ""), annotation.get("link")))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        for kind, link in candidates:
            # hm://c/<cid> names a comment blob, not a resource: the daemon links the blob and cites nothing.
            if isinstance(link, str) and link.startswith("hm://") and not link.startswith("hm://c/"):
                try:
                    yield Link(block_id, kind, parse_hm_id(link))
                except BadRequest:
                    continue  # a malformed link names nothing to cite (the daemon skips it too)
        children = block.get("children")
        if isinstance(children, list):
            yield from links_in([c for c in children if isinstance(c, Mapping)])  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def change_blocks(value: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The blocks a Change's `ReplaceBlock` ops write."""
    body = value.get("body")
    ops = body.get("ops") if isinstance(body, Mapping) else None
    out: list[Mapping[str, Any]] = []
    for op in ops or ():  # pyright: ignore[reportUnknownVariableType]
        if isinstance(op, Mapping) and op.get("type") == "ReplaceBlock" and isinstance(op.get("block"), Mapping):  # pyright: ignore[reportUnknownMemberType]
            out.append(op["block"])  # pyright: ignore[reportUnknownArgumentType]
    return out


def mentions_of(links: Sequence[Link]) -> tuple[str, ...]:
    found = (
        mentioned_account(f"hm://{link.target.uid}" + "".join(f"/{s}" for s in link.target.path)) for link in links
    )
    return tuple(dict.fromkeys(a for a in found if a))
