"""Every `hm://` link in content is checked before anything is signed (HARNESS §12).

A malformed link always fails: it would be published broken and nothing could repair it later. A well-formed link to
something this node does not hold fails too unless the writer passes `skipLinkCheck` — the usual cause is a typo or a
document not yet published, and a signed document cannot be quietly corrected afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from mcp_harness.errors import BadRequest, HarnessError
from mcp_harness.hypermedia.blocks import BlockNode, walk
from mcp_harness.hypermedia.ids import parse_hm_id

if TYPE_CHECKING:
    from mcp_harness.hypermedia.node import Node


def links(tree: Sequence[BlockNode]) -> Iterator[tuple[str, str]]:
    """`(block id, link)` for every `hm://` link: block links (embeds) and annotation links (mentions, links)."""
    for _, node in walk(tree):
        block = node.block
        if block.link and block.link.startswith("hm://"):
            yield block.id, block.link
        for annotation in block.annotations:
            if annotation.link and annotation.link.startswith("hm://"):
                yield block.id, annotation.link


def exists(node: Node, link: str) -> bool:
    """Whether the node holds what a well-formed link names: a live document (following its redirects; at the
    version, if given, which must be one of that document's; with the block, if given), a comment not deleted, or an
    account's profile."""
    target = parse_hm_id(link)
    segments = [s for s in target.path if not s.startswith(":")]
    path = "".join(f"/{s}" for s in segments)
    if node.ref(target.uid, path) is not None:
        try:
            document = node.document(target.uid, path, target.version)
        except HarnessError:
            return False
        return not target.block_ref or target.block_ref in document.state.blocks
    if len(segments) == 1:
        found = node.store.comment(target.uid, segments[0])
        return found is not None and not found[0].deleted
    return not segments and node.profile(target.uid) is not None


def check(node: Node, tree: Sequence[BlockNode], skip_missing: bool) -> None:
    """Refuse the first malformed link, and (unless `skip_missing`) the first that names nothing here.

    Raises:
        BadRequest: the link, the block it is in, and how to fix it.
    """
    for block_id, link in links(tree):
        try:
            parse_hm_id(link)
        except BadRequest as exc:
            raise BadRequest(f"Link {link!r} in block {block_id} is malformed: {exc.message}") from None
        if not skip_missing and not exists(node, link):
            raise BadRequest(
                f"Link {link} in block {block_id} names nothing published on this node. Publish the target first, "
                "fix the link, or pass options.skipLinkCheck: true to publish it unchecked."
            )
