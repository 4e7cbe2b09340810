"""`read hm://…`: documents, versions, blocks, comments and the `/:directory`, `/:attributes`, `/:profile` views.

Documents render as Seed-dialect markdown with `<!-- id:… -->` block markers by default, so what an agent reads it
can edit and write back with its block ids intact; `format: "json"` returns the block tree. Every result carries the
`requestedId` as asked and the canonical `id` (after redirects) with the `version` read.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from mcp_harness import cursors
from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.hypermedia.blocks import Block, BlockNode, tree_to_json, walk
from mcp_harness.hypermedia.documents import find_block
from mcp_harness.hypermedia.ids import HmId, parse_hm_id
from mcp_harness.hypermedia.markdown import bound_rendered, render_markdown
from mcp_harness.hypermedia.node import Comment, Document, Node, comment_tree, hm_url
from mcp_harness.spaces.hm.options import DIRECTORY_PAGE, MAX_DIRECTORY_PAGE
from mcp_harness.store._util import iso_time
from mcp_harness.verbs.base import VerbContext, VerbResult

VIEWS = (":directory", ":attributes", ":profile", ":comments")
EMBED_DEPTH = 2


def read_hm(ctx: VerbContext, text: str, fmt: str, options: dict[str, Any] | None = None) -> VerbResult:
    requested = parse_hm_id(text)
    node: Node = ctx.services.hypermedia
    segments = list(requested.path)
    view = None
    if segments and segments[-1].startswith(":"):
        view = segments.pop()
    elif segments and segments[0].startswith(":"):
        view = segments.pop(0)
    if view is not None and view not in VIEWS:
        raise BadRequest(f"Unknown view {view!r}. Supported views: {', '.join('/' + v for v in VIEWS)}.")
    path = "".join(f"/{s}" for s in segments)
    options = dict(options or {})
    fresh = options.pop("fresh", False)
    if not isinstance(fresh, bool):
        raise BadRequest("read hm:// option fresh must be a boolean: true asks the configured Seed servers first.")
    if options and view not in (":directory", ":comments"):
        keys = ", ".join(sorted(options))
        raise BadRequest(
            f"read hm:// option(s) {keys} page the /:directory and /:comments views only; {text} is neither."
        )
    if view == ":profile":
        return _profile(node, requested, text, fmt)
    if view is None and len(segments) == 1 and node.ref(requested.uid, path) is None:
        comment = node.find_comment(requested.uid, segments[0])
        if comment is not None:
            return _comment(node, comment, text, fmt)
    pulled = _pull(ctx, node, requested.uid, path, fresh)
    document = node.document(requested.uid, path, requested.version)
    base: dict[str, Any] = {"requestedId": text, "id": document.id, "version": document.version, "name": document.name}
    if pulled is not None:
        base["pulled"] = pulled
    if document.id != hm_url(requested.uid, path):
        base["redirectedFrom"] = hm_url(requested.uid, path)
    if view == ":attributes":
        data = {
            "summary": f"Metadata of {document.id} ({document.name or 'untitled'}).",
            **base,
            "metadata": document.state.metadata,
            "updateTime": iso_time(document.state.update_time),
        }
        return VerbResult.of(data, _metadata_lines(document.state.metadata), fmt=fmt)
    if view == ":directory":
        return _directory(node, document, base, fmt, options or {})
    if view == ":comments":
        return _comments(node, document, base, fmt, options or {})
    return _document(node, document, requested, base, fmt)


def _pull(ctx: VerbContext, node: Node, space: str, path: str, fresh: bool) -> dict[str, Any] | None:
    """Fetch the document (and its comments) from the `[[hypermedia.servers]]` when this node lacks it or the read
    asks `fresh`; every blob verified before it is stored (hypermedia/sync/pull.py). A fresh read of a document held
    here still answers from here when no server can be reached, saying why."""
    servers = ctx.services.settings.hypermedia.servers
    held = node.ref(space, path) is not None
    if not servers or (held and not fresh):
        return None
    from mcp_harness.hypermedia.sync import sync_for

    try:
        return sync_for(ctx.services).puller.pull(space, path).to_json()
    except NotFound as missing:
        if not held:
            raise
        return {"target": hm_url(space, path), "server": None, "errors": [missing.message]}


def _document(node: Node, document: Document, requested: HmId, base: dict[str, Any], fmt: str) -> VerbResult:
    tree = document.state.tree
    metadata: dict[str, Any] | None = document.state.metadata
    where = document.id
    if requested.block_ref:
        found = find_block(tree, requested.block_ref)
        if found is None:
            raise NotFound(f"{document.id} has no block {requested.block_ref!r} at version {document.version}.")
        if requested.block_range is not None:
            start, end = requested.block_range
            found = BlockNode(_slice(found.block, start, end))
        tree, metadata = (found,), None
        where = f"{document.id}#{requested.block_ref}"
    if fmt == "json":
        data = {
            "summary": f"Read {where} ({document.name or 'untitled'}).",
            **base,
            **document.to_json(),
            "requestedId": base["requestedId"],
            "content": tree_to_json(tree),
        }
        return VerbResult.of(data, fmt=fmt)
    markdown = render_markdown(resolve_embeds(node, tree, EMBED_DEPTH), metadata, frontmatter=metadata is not None)
    markdown, truncated = bound_rendered(markdown)
    data = {
        "summary": f"Read {where} ({document.name or 'untitled'}), version {document.version}.",
        **base,
        "markdown": markdown,
    }
    if truncated:
        data["truncated"] = True
    labels = _embed_labels(node, tree)
    text = markdown
    if labels:
        # Mentions stay `<hm://…>` in the markdown so it can be edited and written back as is; their readable labels
        # ride beside it.
        data["embeds"] = labels
        text += "\n\nEmbedded references:\n" + "\n".join(f"- {e['link']} — {e['label']}" for e in labels)
    return VerbResult.of(data, text)


def _embed_labels(node: Node, tree: tuple[BlockNode, ...]) -> list[dict[str, str]]:
    seen: dict[str, dict[str, str]] = {}
    for _, item in walk(tree):
        for annotation in item.block.annotations:
            link = annotation.link
            if annotation.type == "Embed" and link and link.startswith("hm://") and link not in seen:
                embedded = _embedded(node, link)
                label = embedded[0] if embedded else _comment_label(node, link)
                seen[link] = {"link": link, "label": label}
    return list(seen.values())


def _comment_label(node: Node, link: str) -> str:
    try:
        target = parse_hm_id(link)
    except BadRequest:
        return "(malformed link)"
    if len(target.path) == 1 and node.store.comment(target.uid, target.path[0]) is not None:
        return f"comment by {target.uid}"
    if not target.path and (profile := node.profile(target.uid)) is not None:
        return f"account {profile['name']}"
    return "(not on this node)"


def _slice(block: Block, start: int, end: int) -> Block:
    # Offsets are code points, as Seed's editor counts them; annotations outside the slice are dropped with it.
    return replace(block, text=block.text[start:end], annotations=())


def resolve_embeds(node: Node, tree: tuple[BlockNode, ...], depth: int) -> tuple[BlockNode, ...]:
    """Embed blocks become the embedded document's content (quoted, `depth` levels deep) under a readable label;
    what cannot be resolved stays a plain labelled link, never an error."""
    out: list[BlockNode] = []
    for node_ in tree:
        block = node_.block
        children = resolve_embeds(node, node_.children, depth)
        if block.type == "Embed" and block.link and block.link.startswith("hm://") and depth > 0:
            embedded = _embedded(node, block.link)
            if embedded is not None:
                label, content = embedded
                quote = Block(
                    id=block.id,
                    type="Paragraph",
                    text=f"Embedded: {label} ({block.link})",
                    attributes={"childrenType": "Blockquote"},
                )
                out.append(BlockNode(quote, resolve_embeds(node, content, depth - 1) + children))
                continue
        out.append(BlockNode(block, children))
    return tuple(out)


def _embedded(node: Node, link: str) -> tuple[str, tuple[BlockNode, ...]] | None:
    try:
        target = parse_hm_id(link)
        path = "".join(f"/{s}" for s in target.path)
        document = node.document(target.uid, path, target.version)
    except (BadRequest, NotFound):
        return None
    if target.block_ref:
        found = find_block(document.state.tree, target.block_ref)
        return (f"{document.name or document.id} › {target.block_ref}", (found,)) if found else None
    return document.name or document.id, document.state.tree


def _page_of(options: dict[str, Any], under: str) -> tuple[str | None, int]:
    """The child path a `/:directory` page starts after, and its size; 400 naming what is accepted otherwise."""
    limit = cursors.page_limit(options, "read hm://", DIRECTORY_PAGE, MAX_DIRECTORY_PAGE)
    cursor = options.get("cursor")
    if cursor is None:
        return None, limit
    after = cursors.decode(cursor)
    if after is None or not after.startswith(under + "/"):
        raise BadRequest(
            f"read hm:// option cursor must be the nextCursor of an earlier page of this directory; got "
            f"{json.dumps(cursor)}."
        )
    return after, limit


def _directory(node: Node, document: Document, base: dict[str, Any], fmt: str, options: dict[str, Any]) -> VerbResult:
    """One page of the child documents in path order: an index range, whatever the directory holds (m010)."""
    after, limit = _page_of(options, document.path)
    children = node.children(document.space, document.path, after=after, limit=limit + 1)
    more = len(children) > limit
    children = children[:limit]
    total = node.child_count(document.space, document.path)
    entries = []
    for child in children:
        entries.append(
            {
                "id": child.id,
                "path": child.path,
                "name": child.name,
                "summary": _summary(child),
                "updateTime": iso_time(child.state.update_time),
                "childrenCount": node.descendant_count(child.space, child.path),
            }
        )
    summary = f"{document.id} has {total} child document{'s' if total != 1 else ''}."
    if more or after is not None:
        summary += f" This page holds {len(entries)}" + (
            "; pass options.cursor for the next." if more else ", the last."
        )
    data: dict[str, Any] = {"summary": summary, **base, "documents": entries, "totalDocuments": total}
    if more:
        data["nextCursor"] = cursors.encode(children[-1].path)
    lines = [f"- [{e['name'] or e['path']}]({e['id']}) — {e['summary']}".rstrip(" —") for e in entries]
    if more:
        left = f"{total - len(entries)} more" if after is None else "more"
        lines.append(f"- … {left} (pass options.cursor {data['nextCursor']})")
    return VerbResult.of(data, "\n".join(lines) or None, fmt=fmt)


def _summary(document: Document) -> str:
    given = document.state.metadata.get("summary")
    if isinstance(given, str) and given:
        return given
    for node_ in document.state.tree:
        if node_.block.text.strip():
            text = " ".join(node_.block.text.split())
            return text if len(text) <= 160 else text[:159] + "…"
    return ""


def _comments(node: Node, document: Document, base: dict[str, Any], fmt: str, options: dict[str, Any]) -> VerbResult:
    """One page of the document's comments, oldest first: an index range, however many it has."""
    limit = cursors.page_limit(options, "read hm://", DIRECTORY_PAGE, MAX_DIRECTORY_PAGE)
    after = _comment_after(options.get("cursor"))
    comments = node.comments_page(document.space, document.path, after=after, limit=limit + 1)
    more = len(comments) > limit
    comments = comments[:limit]
    total = node.comment_count(document.space, document.path)
    entries = [_comment_json(c) for c in comments]
    summary = f"{document.id} has {total} comment{'s' if total != 1 else ''}."
    if more or after is not None:
        tail = "; pass options.cursor for the next." if more else ", the last."
        summary += f" This page holds {len(entries)}{tail}"
    data: dict[str, Any] = {"summary": summary, **base, "comments": entries, "totalComments": total}
    if more:
        last = comments[-1].row
        data["nextCursor"] = cursors.encode_keyset(last.ts, last.cid)
    body = "\n\n".join(f"**{e['author']}** ({e['id']}):\n\n{e['markdown']}" for e in entries)
    return VerbResult.of(data, body or None, fmt=fmt)


def _comment_after(cursor: object) -> tuple[int, str] | None:
    if cursor is None:
        return None
    after = cursors.decode_keyset(cursor)
    if after is None:
        raise BadRequest(
            f"read hm:// option cursor must be the nextCursor of an earlier page of these comments; got "
            f"{json.dumps(cursor)}."
        )
    return after


def _comment_json(comment: Comment) -> dict[str, Any]:
    tree = comment_tree(comment.body)
    out: dict[str, Any] = {
        "id": f"hm://{comment.id}",
        "author": comment.row.author,
        "target": hm_url(comment.row.space, comment.row.path),
        "createTime": iso_time(comment.row.ts),
        "markdown": render_markdown(tree, None, block_ids=False, frontmatter=False).strip(),
        "content": tree_to_json(tree),
    }
    if comment.row.reply_parent and comment.row.reply_parent != comment.row.cid:
        out["replyParent"] = comment.row.reply_parent
    return out


def _comment(node: Node, comment: Comment, text: str, fmt: str) -> VerbResult:
    data = _comment_json(comment)
    data = {
        "summary": f"Comment {data['id']} by {comment.row.author} on {data['target']}.",
        "requestedId": text,
        **data,
    }
    if fmt == "json":
        return VerbResult.of(data, fmt=fmt)
    return VerbResult.of(data, data["markdown"])


def _profile(node: Node, requested: HmId, text: str, fmt: str) -> VerbResult:
    profile = node.profile(requested.uid)
    if profile is None:
        raise NotFound(f"No profile published for {requested.uid}.")
    data = {
        "summary": f"Profile of {requested.uid}: {profile['name']}.",
        "requestedId": text,
        "id": f"hm://{requested.uid}",
        **profile,
    }
    return VerbResult.of(data, _metadata_lines(profile), fmt=fmt)


def _metadata_lines(values: dict[str, Any]) -> str | None:
    return "\n".join(f"- {k}: {v}" for k, v in values.items()) or None
