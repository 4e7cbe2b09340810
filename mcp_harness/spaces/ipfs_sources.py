"""What `write ipfs://` and a document's pictures publish from: a memory file or a conversation attachment.

Both are streamed into the importer (`store/ipfs_blocks.ipfs_upload`), never read whole, so publishing a large file
costs a chunk of memory, not the file. A memory file is opened the way `memory/store.py` opens one — each directory
relative to its parent with `O_NOFOLLOW`, the file itself `O_NOFOLLOW | O_NONBLOCK` and checked to be a regular
file — so a symlink planted in memory cannot publish a file from outside it.

`media_uploader` is what `write hm://` hands the parsed document to (spaces/hm/write.py, after the link check and
only under the publish grant): every Image, Video and File block that points at a memory path or an attachment is
uploaded, and its link becomes `ipfs://<cid>`, which is how Seed stores media.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO

from mcp_harness.errors import BadRequest, NotFound, TooLarge
from mcp_harness.hypermedia.blocks import BlockNode
from mcp_harness.hypermedia.unixfs import Imported
from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.store.ipfs_blocks import IpfsBlockStore, ipfs_upload
from mcp_harness.verbs.base import VerbContext

MEDIA_BLOCKS = frozenset({"Image", "Video", "File"})
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Source:
    """Bytes to publish: what to call them in messages, and how to open them."""

    label: str
    """`~/memory/<path>` or `attachment:<id>`."""
    name: str
    open: Callable[[], contextlib.AbstractContextManager[BinaryIO]]


def memory_source(ctx: VerbContext, raw: object, what: str = "options.fromPath") -> Source:
    """A memory file, by `~/memory/<path>` or a bare relative path.

    Raises:
        BadRequest: not a path; NotFound (when opened): no regular file there.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise BadRequest(f"{what} must name a file in ~/memory, e.g. ~/memory/pictures/cat.png.")
    rest = raw.strip().removeprefix("~/memory/").removeprefix("harness://memory/")
    path = normalize_memory_path(rest)
    store = ctx.services.memory(ctx.agent)

    @contextlib.contextmanager
    def opened() -> Iterator[BinaryIO]:
        parts = path.split("/")
        dir_fd = store.open_dir(parts[:-1])
        if dir_fd is None:
            raise NotFound(f"Memory file not found: {path}")
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            reason = " (symlinks are not followed)" if exc.errno == errno.ELOOP else ""
            raise NotFound(f"Memory file not found: {path}{reason}") from None
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise BadRequest(f"{path} is a directory; publish one file at a time.")
            if not stat.S_ISREG(mode):
                raise NotFound(f"Memory file not found: {path} (not a regular file).")
            yield fh

    return Source(f"~/memory/{path}", path.rsplit("/", 1)[-1], opened)


def attachment_source(ctx: VerbContext, raw: object) -> Source:
    """A conversation attachment the caller may see, by id or `attachment:<id>`."""
    from mcp_harness.spaces.attachment import find_attachment
    from mcp_harness.store.attachments import check_id

    text = raw.strip().removeprefix("attachment:") if isinstance(raw, str) else raw
    record = find_attachment(ctx.services, ctx.scope, ctx.session_id, check_id(text))
    path = ctx.services.attachments.path(record)

    @contextlib.contextmanager
    def opened() -> Iterator[BinaryIO]:
        with path.open("rb") as fh:
            yield fh

    return Source(f"attachment:{record.id}", record.name, opened)


def upload(ctx: VerbContext, source: Source | bytes, *, dry_run: bool) -> Imported:
    """Publish the bytes as a UnixFS file in the block store (a dry run computes the CID and stores nothing).

    Raises:
        TooLarge: over `[ipfs] max_file_bytes`.
    """
    limit = ctx.services.settings.ipfs.max_file_bytes
    blocks = None if dry_run else IpfsBlockStore(ctx.services.db)
    label = "content" if isinstance(source, bytes) else source.label
    try:
        if isinstance(source, bytes):
            return ipfs_upload(blocks, source, max_bytes=limit)
        with source.open() as fh:
            return ipfs_upload(blocks, fh, max_bytes=limit)
    except OverflowError:
        raise TooLarge(f"{label} is larger than {limit} bytes, the limit set by [ipfs] max_file_bytes.") from None


def _local_source(ctx: VerbContext, block_id: str, kind: str, link: str, base: str) -> Source | None:
    """The source a media link names, or None when it is already published (`ipfs://`) or on the web. A relative
    path is relative to `base` (the folder of a published memory file; the memory root for inline content)."""
    lowered = link.lower()
    if lowered.startswith("attachment:"):
        return attachment_source(ctx, link)
    if lowered.startswith("file:///") or lowered.startswith("file://localhost/"):
        raise BadRequest(
            f"{kind} block {block_id} links to {link}, a file on the server's disk. Only memory files are "
            "published: link ~/memory/<path> (or a path relative to your memory) or attachment:<id>."
        )
    what = f"The {kind} link in block {block_id}"
    local = lowered.startswith("file://") or ":" not in link.split("/", 1)[0]
    path = link[len("file://") :] if lowered.startswith("file://") else link
    if not local:
        return None
    if path.startswith("~/memory/") or not base:
        return memory_source(ctx, path, what)
    return memory_source(ctx, f"{base}/{path}", what)


def media_uploader(
    ctx: VerbContext, *, dry_run: bool, base: str = ""
) -> Callable[[Sequence[BlockNode]], tuple[BlockNode, ...]]:
    """What rewrites a document's local media links to `ipfs://` (uploading each file once; none on a dry run)."""
    done: dict[str, str] = {}

    def rewrite(tree: Sequence[BlockNode]) -> tuple[BlockNode, ...]:
        out: list[BlockNode] = []
        for node in tree:
            block = node.block
            children = rewrite(node.children) if node.children else node.children
            if block.type in MEDIA_BLOCKS and block.link:
                source = _local_source(ctx, block.id, block.type, block.link, base)
                if source is not None:
                    if source.label not in done:
                        try:
                            done[source.label] = f"ipfs://{upload(ctx, source, dry_run=dry_run).cid}"
                        except NotFound as exc:
                            raise BadRequest(
                                f"{block.type} block {block.id} links to {block.link}: {exc.message}. Save the file "
                                "in memory first, or link an ipfs:// or https:// URL."
                            ) from None
                    block = replace(block, link=done[source.label])
            out.append(node if block is node.block and children is node.children else BlockNode(block, children))
        return tuple(out)

    return rewrite
