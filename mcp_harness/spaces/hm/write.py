"""`write hm://<account>/<path>`: publish signed documents and comments on the embedded node (HARNESS §12).

The write path refuses rather than guesses, and every refusal names what was wrong and what is accepted: unknown
option keys (with hints for retired spellings), a document without a name, a nested path without its parent, a
malformed or dangling `hm://` link (checked before anything is signed), content over 256 KiB, a write without the
publish grant. `dryRun: true` runs every check and builds every blob, then stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp_harness.errors import BadRequest, Forbidden, TooLarge
from mcp_harness.grants import may
from mcp_harness.hypermedia import hm_links
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.ids import parse_hm_id, tsid, version_string
from mcp_harness.hypermedia.markdown import (
    diff_operations,
    document_operations,
    match_block_ids,
    metadata_operations,
    parse_markdown,
)
from mcp_harness.hypermedia.node import Node, comment_body, hm_url
from mcp_harness.identity.keys import KeyPair
from mcp_harness.spaces.hm.common import Target, check_parent, live, path_of, require, require_name, whole_document
from mcp_harness.spaces.hm.options import ACTION_OPTIONS, BASE_OPTIONS, FROM_PATH_OPTIONS
from mcp_harness.spaces.hm.profile import profile_update, relabel_identity
from mcp_harness.spaces.hm.structure import delete, move, redirect
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

MAX_CONTENT_BYTES = 256 * 1024
MAX_METADATA_BYTES = 16 * 1024
PUBLISH_REFUSAL = (
    'Publishing is not enabled for this agent. The owner can grant "Publish Seed content" in its tool settings.'
)
RAW_COMMANDS = ("profile.update",)
"""The dotted raw commands the embedded node carries out itself (HARNESS §12: they pass through as raw commands)."""
NO_CONTENT_ACTIONS = ("move", "redirect", "delete", "fork", "profile.update")
OPTIONS_HINT = "Extra command fields belong in options.input, never as loose option keys."


def write_hm(ctx: VerbContext, text: str, content: object, options: dict[str, Any], dry_run: bool) -> VerbResult:
    """Dispatch a hypermedia write on `options.action` (default: create a document).

    The whole write — the reads it decides on (current heads, whether a path is free, the signer's latest ts), the
    blobs it signs and their storing — runs in one transaction, whoever calls it: two writes to one document can
    never both build on the same heads, nor two creates both find a path free.
    """
    with ctx.services.db.transaction():
        return _write_hm(ctx, text, content, options, dry_run)


def _write_hm(ctx: VerbContext, text: str, content: object, options: dict[str, Any], dry_run: bool) -> VerbResult:
    address = parse_hm_id(text)
    if "fromPath" in options:
        refuse_unknown_options(f"write {text} with fromPath", options, FROM_PATH_OPTIONS)
        content = _memory_markdown(ctx, options["fromPath"])
        action = "publish"
    else:
        action = options.get("action", "document")
        if not isinstance(action, str) or not action:
            raise BadRequest(f"options.action must be a string: one of {', '.join(ACTION_OPTIONS)}.")
        allowed = ACTION_OPTIONS.get(action, (*BASE_OPTIONS, "name", "metadata"))
        refuse_unknown_options(f"write hm:// ({action})", options, allowed, OPTIONS_HINT)
        if action not in ACTION_OPTIONS:
            if "." in action:
                raise BadRequest(
                    f'Raw command "{action}" is not available on the embedded node. Raw commands supported here: '
                    f"{', '.join(RAW_COMMANDS)}; actions: {', '.join(a for a in ACTION_OPTIONS if '.' not in a)}."
                )
            raise BadRequest(f'Unknown write action "{action}". Supported: {", ".join(ACTION_OPTIONS)}.')
        if action not in RAW_COMMANDS and options.get("input") not in (None, {}):
            raise BadRequest("options.input carries the fields of a raw dotted command; this action takes none.")
        if action in NO_CONTENT_ACTIONS and content is not None:
            raise BadRequest(
                f"write hm:// ({action}) takes no content, and would drop it: leave content out"
                + (" (options.name / options.metadata rename the fork)." if action == "fork" else ".")
            )
    skip = options.get("skipLinkCheck", False)
    if not isinstance(skip, bool):
        raise BadRequest("options.skipLinkCheck must be a boolean.")
    if not may(ctx.services, ctx.agent.definition, "publish"):
        raise Forbidden(PUBLISH_REFUSAL)
    if address.version or address.block_ref:
        raise BadRequest(f"write takes a document address without ?v= or #block: hm://{address.uid}/<path>.")
    node: Node = ctx.services.hypermedia
    path = path_of(address)
    mode = {"comment": "comment", "profile.update": "profile"}.get(action, "write")
    from mcp_harness.spaces.ipfs_sources import media_uploader

    base = _memory_dir(options["fromPath"]) if action == "publish" else ""
    media = media_uploader(ctx, dry_run=dry_run, base=base)
    target = Target(address.uid, path, _signer(ctx, address.uid, path, options.get("signer"), mode), media)
    body = _content(content)
    handler = _HANDLERS[action]
    published, data = handler(node, target, body, options, skip)
    data["signer"] = target.signer.account_id
    data["dryRun"] = dry_run
    data["blobs"] = [str(b.cid) for b in published]
    if dry_run:
        data["summary"] = f"Dry run: {data['summary']} Nothing was signed into the store or published."
    else:
        node.publish(published)
        if action == "profile.update":
            relabel_identity(ctx, target.signer.account_id, data["name"])
        if published and ctx.services.settings.hypermedia.servers:
            _say_push(ctx, published, data)
    return VerbResult.of(data)


def _say_push(ctx: VerbContext, published: list[Blob], data: dict[str, Any]) -> None:
    """The result's `push`: per configured Seed server, what this write queued and what is still pending (the push
    runs in the background once the write commits: publishing never waits on the network)."""
    from mcp_harness.hypermedia.sync.push import write_push_status

    data["push"] = status = write_push_status(ctx.services.db, ctx.services.settings.hypermedia.servers, published)
    queued = [s for s in status if s.get("queued")]
    if queued:
        where = ", ".join(f"{s['queued']} to {s['server']}" for s in queued)
        data["summary"] += f" Push queued ({where}); it runs in the background (`mcp-harness hm status`)."


def _signer(ctx: VerbContext, space: str, path: str, wanted: object, mode: str = "write") -> KeyPair:
    """The key that signs: `options.signer`, else the space's own identity, else the only one.

    `mode` "write" (changing a document) needs the space's key or a WRITER capability over the path; "comment"
    needs neither (anyone may comment on any document); "profile" needs the account's own key.
    """
    from mcp_harness.identity.identities import identities_of, load_keypair

    identities = identities_of(ctx.services, ctx.agent.definition)
    if not identities:
        raise Forbidden(
            "This agent has no signing identity to publish with. The owner creates one (`mcp-harness identity "
            "create --label NAME`) and gives it to the agent (`mcp-harness agent update AGENT --signing-key NAME`, "
            "or signing_keys in [agent])."
        )
    choices = ", ".join(f"{i.label} ({i.account_id})" for i in identities)
    if wanted is not None:
        if not isinstance(wanted, str) or not wanted.strip():
            raise BadRequest(f"options.signer must be a profile name or public key: one of {choices}.")
        found = [i for i in identities if wanted.strip() in (i.label, i.account_id, i.name)]
        if not found:
            raise BadRequest(f"options.signer {wanted!r} is not one of this agent's identities: {choices}.")
        identity = found[0]
    else:
        own = [i for i in identities if i.account_id == space]
        if own:
            identity = own[0]
        elif len(identities) == 1:
            identity = identities[0]
        else:
            raise BadRequest(f"Several identities could sign for hm://{space}; pass options.signer: one of {choices}.")
    node: Node = ctx.services.hypermedia
    if mode == "profile" and identity.account_id != space:
        raise Forbidden(
            f"Only hm://{space}'s own key publishes its profile, and {identity.label} ({identity.account_id}) is "
            f"another account. This agent's identities: {choices}."
        )
    if (
        mode == "write"
        and identity.account_id != space
        and not node.store.has_capability(space, identity.account_id, path)
    ):
        raise Forbidden(
            f"{identity.label} ({identity.account_id}) cannot write in hm://{space}: it is not that account and holds "
            f"no WRITER capability covering {path or 'the home document'}. Write under hm://{identity.account_id}/…"
        )
    return load_keypair(ctx.services, identity.name)


def _content(content: object) -> str | None:
    if content is None:
        return None
    if not isinstance(content, str):
        raise BadRequest("write hm:// content must be markdown text.")
    size = len(content.encode("utf-8", "surrogatepass"))
    if size > MAX_CONTENT_BYTES:
        raise TooLarge(
            f"Content is {size} bytes; a document or comment holds at most {MAX_CONTENT_BYTES} bytes (256 KiB). "
            "Split it into several documents."
        )
    return content


def _memory_markdown(ctx: VerbContext, from_path: object) -> str:
    from mcp_harness.memory.paths import normalize_memory_path

    if not isinstance(from_path, str) or not from_path.strip():
        raise BadRequest("options.fromPath must name a markdown file in ~/memory, e.g. notes/post.md.")
    rest = from_path.strip().removeprefix("~/memory/").removeprefix("~/memory")
    path = normalize_memory_path(rest)
    file = ctx.services.memory(ctx.agent).read_file(path)
    if file.text is None:
        raise BadRequest(f"{path} is a binary file; publish markdown text as a document.")
    if file.entry.size > MAX_CONTENT_BYTES:
        raise TooLarge(f"{path} is {file.entry.size} bytes; a document holds at most {MAX_CONTENT_BYTES} bytes.")
    return file.text


def _memory_dir(from_path: str) -> str:
    """The memory folder of a published file: its relative picture links resolve from there."""
    rest = from_path.strip().removeprefix("~/memory/").removeprefix("~/memory")
    return rest.rsplit("/", 1)[0] if "/" in rest.strip("/") else ""


def _metadata(options: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(base)
    extra = options.get("metadata")
    if extra is not None:
        if not isinstance(extra, dict):
            raise BadRequest("options.metadata must be an object, e.g. {name, summary, icon}.")
        metadata.update(extra)
    name = options.get("name")
    if name is not None:
        if not isinstance(name, str) or not name.strip():
            raise BadRequest("options.name must be a non-empty string: the document's name.")
        metadata["name"] = name.strip()
    if "name" in metadata and (not isinstance(metadata["name"], str) or not metadata["name"].strip()):
        raise BadRequest(
            f"A document's name cannot be removed or left empty (got {metadata['name']!r}); pass a new name "
            "instead (options.name, metadata.name or a `name:` frontmatter line)."
        )
    from mcp_harness.hypermedia.cbor import encode

    if len(encode(metadata)) > MAX_METADATA_BYTES:
        raise TooLarge(f"Document metadata is over {MAX_METADATA_BYTES} bytes once encoded; keep it small.")
    return metadata


def _create(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    if body is None:
        raise BadRequest(f"Creating {target.url} requires content (markdown).")
    parsed = parse_markdown(body)
    metadata = _metadata(options, parsed.metadata)
    require_name(metadata)
    check_parent(node, target.space, target.path)
    hm_links.check(node, parsed.tree, skip)
    ops = metadata_operations(metadata) + document_operations(target.with_media(parsed.tree))
    published = node.create(target.signer, target.space, target.path, ops)
    return published, _published_data("Published", target, published, metadata, "document")


def _update(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    document = require(node, target, "update")
    ops: list[dict[str, Any]] = []
    frontmatter: dict[str, Any] = {}
    if body is not None:
        parsed = parse_markdown(body)
        frontmatter = parsed.metadata
        tree = match_block_ids(document.state.tree, parsed.tree)
        hm_links.check(node, tree, skip)
        ops.extend(diff_operations(document.state.tree, target.with_media(tree)))
    wanted = _metadata(options, frontmatter)
    if body is None and not wanted:
        raise BadRequest("update needs content (a new body) or options.name / options.metadata (metadata only).")
    ops = _changed_metadata(wanted, document.state.metadata) + ops
    if not ops:
        data = {
            "summary": f"{target.url} already says exactly that; nothing to publish.",
            "action": "update",
            "id": target.url,
            "version": document.version,
            "name": document.name,
        }
        return [], data
    published = node.update(target.signer, document, ops)
    metadata = {**document.state.metadata, "name": wanted.get("name", document.name)}
    return published, _published_data("Updated", target, published, metadata, "update")


def _changed_metadata(wanted: dict[str, Any], current: dict[str, Any]) -> list[dict[str, Any]]:
    """The SetAttributes op for the leaves of `wanted` that differ from the document's: keys left out are kept, a
    null removes one, and `theme.headerLayout` names the same leaf as `theme: {headerLayout}`."""
    ops = metadata_operations(wanted)
    if not ops:
        return []
    attrs = [a for a in ops[0]["attrs"] if not _same_leaf(_leaf(current, a["key"]), a["value"])]
    return [{**ops[0], "attrs": attrs}] if attrs else []


_ABSENT = object()


def _leaf(metadata: dict[str, Any], key: list[str]) -> object:
    value: object = metadata
    for part in key:
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]  # pyright: ignore[reportUnknownVariableType]
    return value  # pyright: ignore[reportUnknownVariableType]


def _same_leaf(old: object, new: object) -> bool:
    if old is _ABSENT:
        return new is None
    return type(old) is type(new) and old == new if isinstance(old, bool) or isinstance(new, bool) else old == new


def _publish_memory(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    if live(node, target) is None:
        return _create(node, target, body, {}, skip)
    return _update(node, target, body, {}, skip)


def _comment(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    if body is None or not body.strip():
        raise BadRequest("A comment needs content (markdown).")
    on = target
    raw_target = options.get("target")
    if raw_target is not None:
        if not isinstance(raw_target, str):
            raise BadRequest("options.target must be the hm:// address of the document to comment on.")
        parsed_target = parse_hm_id(raw_target)
        if parsed_target.block_ref:
            raise BadRequest(
                "Comments attach to a whole document; quote a block by embedding <hm://…#block> in the content."
            )
        on = Target(parsed_target.uid, path_of(parsed_target), target.signer)
        version = parsed_target.version
    else:
        version = None
    document = require(node, on, "comment on")
    if version:
        document = node.document(on.space, on.path, version)
    reply = None
    reply_to = options.get("replyTo")
    if reply_to is not None:
        if not isinstance(reply_to, str) or "/" not in reply_to.removeprefix("hm://"):
            raise BadRequest("options.replyTo must be a comment id: <author>/<tsid> or hm://<author>/<tsid>.")
        author, _, comment_tsid = reply_to.removeprefix("hm://").partition("/")
        reply = node.comment(author, comment_tsid)
        if (reply.row.space, reply.row.path) != (document.space, document.path):
            raise BadRequest(
                f"options.replyTo hm://{reply.id} is a comment on {hm_url(reply.row.space, reply.row.path)}, not on "
                f"{document.id}: a reply goes on the document its comment is on."
            )
    parsed = parse_markdown(body)
    hm_links.check(node, parsed.tree, skip)
    blob = node.comment_blob(target.signer, document, comment_body(target.with_media(parsed.tree)), reply)
    comment_id = f"{target.signer.account_id}/{tsid(blob.ts, blob.data)}"
    data = {
        "summary": f"Commented on {on.url} as hm://{comment_id}.",
        "action": "comment",
        "id": f"hm://{comment_id}",
        "target": on.url,
        "version": document.version,
    }
    if reply is not None:
        data["replyTo"] = reply.id
    return [blob], data


def _fork(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    raw = options.get("fromUrl")
    if not isinstance(raw, str) or not raw.strip().startswith("hm://"):
        raise BadRequest("fork needs options.fromUrl: the hm:// address (optionally ?v=…) of the document to copy.")
    source_id = whole_document(raw.strip(), "fromUrl")
    source = node.document(source_id.uid, path_of(source_id), source_id.version)
    if live(node, target) is not None:
        raise BadRequest(f"{target.url} already exists; fork into a new path.")
    check_parent(node, target.space, target.path)
    metadata = _metadata(options, source.state.metadata)
    require_name(metadata)
    ops = metadata_operations(metadata) + document_operations(source.state.tree)
    published = node.create(target.signer, target.space, target.path, ops)
    data = _published_data("Forked", target, published, metadata, "fork")
    data["from"] = f"{source.id}?v={source.version}"
    return published, data


def _published_data(verb: str, target: Target, published: list[Blob], metadata: dict[str, Any], action: str):
    change = next(b for b in reversed(published) if b.type == "Change")
    version = version_string([change.cid])
    name = metadata.get("name")
    return {
        "summary": f"{verb} {target.url} ({name or 'untitled'}), version {version}.",
        "action": action,
        "id": target.url,
        "version": version,
        "name": name,
    }


Handler = Callable[[Node, Target, "str | None", dict[str, Any], bool], tuple[list[Blob], dict[str, Any]]]
_HANDLERS: dict[str, Handler] = {
    "document": _create,
    "update": _update,
    "publish": _publish_memory,
    "comment": _comment,
    "move": move,
    "redirect": redirect,
    "delete": delete,
    "fork": _fork,
    "profile.update": profile_update,
}
