"""What every `write hm://` action shares: where a write lands, path rules, and the document it acts on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.errors import BadRequest, Conflict, NotFound
from mcp_harness.hypermedia.blocks import BlockNode
from mcp_harness.hypermedia.ids import HmId, parse_hm_id
from mcp_harness.hypermedia.node import Document, Node, hm_url
from mcp_harness.identity.keys import KeyPair


@dataclass(frozen=True, slots=True)
class Target:
    """Where a write lands: the space (account), the path, and who signs."""

    space: str
    path: str
    signer: KeyPair
    media: Callable[[Sequence[BlockNode]], tuple[BlockNode, ...]] | None = None
    """Publishes the content's local pictures and files to IPFS and links them as `ipfs://` (spaces/ipfs_sources.py)."""

    @property
    def url(self) -> str:
        return hm_url(self.space, self.path)

    def with_media(self, tree: Sequence[BlockNode]) -> Sequence[BlockNode]:
        """The tree with its Image, Video and File blocks' memory and attachment links uploaded (after the link
        check: nothing is uploaded for a write refused for a bad link)."""
        return tree if self.media is None else self.media(tree)


def path_of(address: HmId) -> str:
    for segment in address.path:
        if (
            not segment
            or segment in (".", "..")
            or segment.startswith(":")
            or any(c in segment for c in "\"'")
            or not segment.isprintable()
        ):
            raise BadRequest(
                f"Invalid path segment {segment!r} in hm://{address.uid}/{'/'.join(address.path)}: segments are "
                "non-empty, printable, without quotes, not '.' or '..' (web gateways would resolve them to another "
                "path), and do not start with ':' (reserved for read views)."
            )
    return "".join(f"/{s}" for s in address.path)


def live(node: Node, target: Target) -> Document | None:
    ref = node.ref(target.space, target.path)
    if ref is None or ref.is_tombstone or ref.is_redirect:
        return None
    return node.document(target.space, target.path)


def require(node: Node, target: Target, doing: str = "change") -> Document:
    """The live document at the target itself (redirects are not followed: a write lands where it is addressed).

    Raises:
        NotFound: nothing there, or it was deleted.
        Conflict: the path redirects; the message names where to.
    """
    ref = node.ref(target.space, target.path)
    if ref is None:
        raise NotFound(f"No document at {target.url} to {doing}. Create it first (the default action).")
    if ref.is_tombstone:
        raise NotFound(
            f"The document at {target.url} was deleted; there is nothing to {doing}. Create a new one there with "
            "the default action."
        )
    if ref.is_redirect:
        to = hm_url(ref.redirect_space or target.space, ref.redirect_path or "")
        raise Conflict(
            f"{target.url} redirects to {to}; {doing} that address instead, or create a new document at "
            f"{target.url} (the default action) to replace the redirect."
        )
    return node.document(target.space, target.path)


def check_parent(node: Node, space: str, path: str) -> None:
    if path.count("/") <= 1:
        return
    parent = path.rsplit("/", 1)[0]
    ref = node.ref(space, parent)
    if ref is None or ref.is_tombstone:
        raise BadRequest(
            f"Cannot put a document at {hm_url(space, path)}: its parent {hm_url(space, parent)} does not exist. "
            "Create the parent first (or choose a shallower path)."
        )


def require_name(metadata: dict[str, Any]) -> None:
    if not isinstance(metadata.get("name"), str) or not metadata["name"].strip():
        raise BadRequest(
            "A document needs a name: pass options.name, options.metadata.name, or a `name:` (or `title:`) line in "
            "the markdown frontmatter."
        )


def whole_document(raw: str, option: str) -> HmId:
    found = parse_hm_id(raw)
    if found.block_ref:
        raise BadRequest(f"options.{option} names a whole document: drop the #{found.block_ref} fragment.")
    return found
