"""What the activity suites share: blobs the node has no write action for (Contacts), documents from markdown or
raw blocks, and the feed read back."""

from __future__ import annotations

from typing import Any

from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.blocks import Block, BlockNode
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.hypermedia.node import Node, comment_body
from mcp_harness.identity.keys import ED25519_PREFIX, KeyPair, public_key_of


def principal(account: str) -> bytes:
    return ED25519_PREFIX + public_key_of(account)


def contact(key: KeyPair, subject: str | None, name: str, ts: int, replaces: str | None = None) -> Blob:
    """A Contact (HYPERMEDIA §1.7) as the JS client's `createContact` shapes it; no subject is a tombstone."""
    value: dict[str, Any] = {"type": "Contact", "name": name, "ts": ts, "id": replaces}
    if subject is not None:
        value["subject"] = principal(subject)
    return blobs.sign_blob(key, value)


def create(node: Node, key: KeyPair, path: str, markdown: str = "", *, name: str = "Doc", tree: Any = None) -> None:
    """Publish a document at `key`'s `path` from markdown, or from a block tree."""
    blocks = tree if tree is not None else parse_markdown(markdown).tree
    ops = metadata_operations({"name": name}) + document_operations(blocks)
    node.publish(node.create(key, key.account_id, path, ops))


def embed_block(block_id: str, link: str) -> BlockNode:
    """An Embed block (the markdown dialect writes none: it reads `<hm://…>` as an inline embed)."""
    return BlockNode(Block(id=block_id, type="Embed", link=link, attributes={"view": "Content"}))


def comment(node: Node, key: KeyPair, space: str, path: str, markdown: str, reply_to: Any = None) -> Blob:
    blob = node.comment_blob(key, node.document(space, path), comment_body(parse_markdown(markdown).tree), reply_to)
    node.publish([blob])
    return blob


def feed(node: Node, **params: Any) -> list[dict[str, Any]]:
    """Every event of the feed (one page of 50), newest first."""
    return node.activity.list_events(pageSize=50, **params)["events"]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]
