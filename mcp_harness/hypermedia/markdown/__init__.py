"""Markdown ↔ Seed block trees in Seed's own markdown dialect, as the official Seed client reads and writes it.

Models read and write documents as markdown; Seed stores them as block trees (HYPERMEDIA §3). This module is the
bridge, and it is a port rather than a fresh design: the official client (`@seed-hypermedia/client`) defines the
dialect — `<!-- id:… -->` comments that keep block identity, heading sections closed by `<!-- end:… -->`, tables
with column and row ids, typed comments for blocks markdown has no syntax for — and a document must mean the same
blocks whether Seed's own tools or we parse it. The tests check every function here against that client.

- `parse_markdown`: frontmatter + markdown → block tree and metadata (`parseMarkdown`).
- `render_markdown`: block tree + metadata → markdown (`blocksToMarkdown`, the variant that resolves nothing).
- `document_operations`, `diff_operations`, `match_block_ids`, `metadata_operations`: trees → Change ops
  (`diff`).

Deliberate differences from the client: annotation offsets count code points, not UTF-16 units; an annotation's
inline attributes (TextColor's `value`, …) are inlined into the op map as Go expects, where the client's op builder
nests them; `render_markdown` keeps `ipfs://` links unless asked for gateway URLs (the client rewrites them by
default, which is lossy); `match_block_ids` never reassigns an id the new markdown named explicitly; the update
diff compares `childrenType`/`language` wherever they sit, so a marker's `attrs` do not force a no-op
`ReplaceBlock`. (Frontmatter with YAML anchors, aliases and tags is read as the client reads it: see `yaml`.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_harness.hypermedia.blocks import ID_CHARS, BlockNode, new_block_id
from mcp_harness.hypermedia.markdown.diff import (
    diff_operations,
    document_operations,
    match_block_ids,
    metadata_operations,
    rebind_table_identities,
)
from mcp_harness.hypermedia.markdown.frontmatter import emit_frontmatter, parse_frontmatter
from mcp_harness.hypermedia.markdown.nodes import freeze
from mcp_harness.hypermedia.markdown.parse import parse_blocks
from mcp_harness.hypermedia.markdown.render import render_blocks

__all__ = [
    "MAX_RENDERED_CHARS",
    "bound_rendered",
    "ID_CHARS",
    "ParsedMarkdown",
    "carries_block_ids",
    "diff_operations",
    "document_operations",
    "emit_frontmatter",
    "match_block_ids",
    "metadata_operations",
    "new_block_id",
    "parse_frontmatter",
    "parse_markdown",
    "rebind_table_identities",
    "render_markdown",
]

MAX_RENDERED_CHARS = 256 * 1024
"""HARNESS §12: rendered hypermedia markdown is kept to its first 262 144 characters."""


def bound_rendered(markdown: str) -> tuple[str, bool]:
    """Rendered markdown cut to `MAX_RENDERED_CHARS` with the reference's `[truncated]` line; and whether it was."""
    if len(markdown) <= MAX_RENDERED_CHARS:
        return markdown, False
    return markdown[:MAX_RENDERED_CHARS] + "\n[truncated]", True


@dataclass(frozen=True, slots=True)
class ParsedMarkdown:
    tree: tuple[BlockNode, ...]
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    """From the frontmatter, coerced as the client does (`title:` read as `name`, `showOutline` a boolean, …)."""


def parse_markdown(text: str, *, new_id: Callable[[], str] | None = None) -> ParsedMarkdown:
    """The block tree and metadata of a markdown document in Seed's dialect.

    Blocks keep the ids their `<!-- id:… -->` markers give; the rest get fresh ids from `new_id` (random by
    default), drawn in the order the client draws them. `childrenType`, `language` and attributes from marker
    comments land in `Block.attributes`, the shape `markdownBlockNodesToHMBlockNodes` produces.
    """
    content, metadata = parse_frontmatter(text)
    return ParsedMarkdown(freeze(parse_blocks(content, new_id or new_block_id)), metadata)


def render_markdown(
    tree: Sequence[BlockNode],
    metadata: Mapping[str, Any] | None = None,
    *,
    block_ids: bool = True,
    frontmatter: bool = True,
    ipfs_gateway: bool = False,
) -> str:
    """Markdown for a block tree, as the client's `blocksToMarkdown` writes it.

    With `block_ids` (the default) every block carries its `<!-- id:… -->` comment and the output parses back to
    the same tree. Without, comments are left out — readable, but types markdown cannot express and heading
    sections do not survive a round trip. `frontmatter` writes the metadata block (always present, `---\\n---` when
    empty, as the client writes it). `ipfs_gateway` rewrites `ipfs://` media links to `https://ipfs.io/ipfs/`,
    the client's default, which does not parse back to the same link.
    """
    return render_blocks(tree, metadata, block_ids=block_ids, frontmatter=frontmatter, ipfs_gateway=ipfs_gateway)


def carries_block_ids(text: str, tree: Sequence[BlockNode]) -> bool:
    """Whether `text` pinned any block of its parse with an explicit `<!-- id:… -->` marker.

    The Seed CLI's test for when to call `match_block_ids`: a file without markers was written by hand, so its
    blocks are matched to the old document by position; one with markers says which block is which. Only
    top-level blocks are checked, as the CLI does, and prose merely mentioning a marker does not count because the
    id must be one the parse produced.
    """
    return any(f"<!-- id:{node.block.id}" in text for node in tree)
