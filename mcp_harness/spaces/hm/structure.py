"""`write hm://` actions that change where a document lives rather than what it says: move, redirect, delete."""

from __future__ import annotations

from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.ids import parse_hm_id
from mcp_harness.hypermedia.node import MAX_REDIRECTS, Node, hm_url
from mcp_harness.spaces.hm.common import Target, check_parent, path_of, require, whole_document


def move(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    document = require(node, target, "move")
    raw = options.get("toPath")
    if not isinstance(raw, str) or not raw.strip():
        raise BadRequest("move needs options.toPath: the new path in the same account, e.g. /notes/2026.")
    text = raw.strip()
    to = parse_hm_id(text) if text.startswith("hm://") else parse_hm_id(f"hm://{target.space}/{text.lstrip('/')}")
    if to.uid != target.space:
        raise BadRequest("move stays within one account; publish a copy with action fork to go elsewhere.")
    if to.version or to.block_ref:
        raise BadRequest("options.toPath is a path: no ?v= or #block.")
    to_path = path_of(to)
    if not to_path or to_path == target.path or not target.path:
        raise BadRequest("move needs a different, non-home path, and the home document cannot move.")
    if to_path.startswith(target.path + "/"):
        raise BadRequest(f"Cannot move {target.url} inside itself ({hm_url(target.space, to_path)}).")
    check_parent(node, target.space, to_path)
    published = node.move(target.signer, document, to_path)
    data = {
        "summary": f"Moved {target.url} to {hm_url(target.space, to_path)}; the old address redirects there.",
        "action": "move",
        "id": hm_url(target.space, to_path),
        "from": target.url,
        "version": document.version,
    }
    return published, data


def redirect(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    document = require(node, target, "redirect")
    raw = options.get("toUrl")
    if not isinstance(raw, str) or not raw.strip().startswith("hm://"):
        raise BadRequest("redirect needs options.toUrl: the hm:// address readers should be sent to.")
    to = whole_document(raw.strip(), "toUrl")
    if to.version:
        raise BadRequest("A redirect points at a document, always its latest version: drop ?v= from options.toUrl.")
    to_path = path_of(to)
    if not target.path:
        raise BadRequest("The home document cannot redirect (Seed refuses it).")
    if (to.uid, to_path) == (target.space, target.path):
        raise BadRequest("A document cannot redirect to itself.")
    check_redirect_target(node, target, to.uid, to_path, skip)
    blob = node.redirect(target.signer, document, to.uid, to_path)
    data = {
        "summary": f"{target.url} now redirects to {hm_url(to.uid, to_path)}.",
        "action": "redirect",
        "id": target.url,
        "to": hm_url(to.uid, to_path),
    }
    return [blob], data


def check_redirect_target(node: Node, source: Target, space: str, path: str, skip: bool) -> None:
    """Follow the target's own redirects: refuse a loop back to the source or a chain readers would give up on
    (always), and a target that is missing or deleted (unless `skip`)."""
    chain = [hm_url(space, path)]
    ref = node.ref(space, path)
    while ref is not None and ref.is_redirect:
        space, path = ref.redirect_space or space, ref.redirect_path or ""
        chain.append(hm_url(space, path))
        if (space, path) == (source.space, source.path):
            raise BadRequest(f"Redirecting {source.url} there would make a loop: {' → '.join(chain)}.")
        if len(chain) > MAX_REDIRECTS:
            raise BadRequest(
                f"{chain[0]} already redirects {len(chain) - 1} times ({' → '.join(chain)}); readers stop following "
                f"after {MAX_REDIRECTS}. Redirect to the final address instead."
            )
        ref = node.ref(space, path)
    if skip:
        return
    if ref is None:
        raise BadRequest(
            f"Redirect target {chain[-1]} does not exist; pass skipLinkCheck: true to redirect there anyway."
        )
    if ref.is_tombstone:
        raise BadRequest(f"Redirect target {chain[-1]} was deleted; pass skipLinkCheck: true to redirect there anyway.")


def delete(node: Node, target: Target, body: str | None, options: dict[str, Any], skip: bool):
    document = require(node, target, "delete")
    if not target.path:
        raise BadRequest("The home document cannot be deleted (Seed refuses it); update it instead.")
    blob = node.tombstone(target.signer, document)
    return [blob], {"summary": f"Deleted {target.url}.", "action": "delete", "id": target.url}
