"""Hypermedia first: an `https://` URL that names a Seed document is read as the document, not as scraped HTML.

How a URL is recognized, as the official client does it (`resolveHypermediaUrl`): a gateway URL
(`https://<host>/hm/<account>/<path>`) names its document outright; any other URL is asked with an `OPTIONS`
request, and a Seed site answers 200 with an `x-hypermedia-id` header (plus `x-hypermedia-version`). The document
itself comes from the same origin's typed API, `GET /api/Resource?id=<hm id>`, whose answer is superjson-wrapped
JSON (HYPERMEDIA §4).

The fall-through rule is strict (issue: "never on other failures"): only an explicit "not hypermedia" (no header
on the OPTIONS answer) or a 404 / `not-found` from the API hands the URL to the web reader. A site that says it is
hypermedia but fails to serve the document is an error, so an agent never receives a page's HTML chrome in place
of the document's real content.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlsplit

from mcp_harness.errors import BadRequest, NotFound, Upstream
from mcp_harness.hypermedia.blocks import tree_from_json
from mcp_harness.hypermedia.documents import find_block
from mcp_harness.hypermedia.ids import HmId, pack_hm_id, parse_fragment, parse_hm_id
from mcp_harness.hypermedia.markdown import bound_rendered, render_markdown
from mcp_harness.identity.keys import public_key_of
from mcp_harness.web.egress import Egress

MAX_API_BYTES = 8 * 1024 * 1024


def hypermedia_id_of(egress: Egress, url: str) -> HmId | None:
    """The hm id a web URL names, or None when the site says it is not hypermedia.

    Raises:
        Upstream: the site could not be reached (not a reason to fall through: the GET would fail the same way).
    """
    if "/hm/" in urlsplit(url).path:
        # A gateway path names its document outright, but only if what follows /hm/ is an account id: any site may
        # have an /hm/ page of its own, and guessing would send the API call (and its failure) to a plain site.
        try:
            found = parse_hm_id(url)
            public_key_of(found.uid)
            return found
        except BadRequest:
            pass
    with egress.open(url, method="OPTIONS") as response:
        if response.status != 200:
            return None
        raw = response.headers.get("x-hypermedia-id")
        if not raw:
            return None
        version = response.headers.get("x-hypermedia-version")
    try:
        found = parse_hm_id(unquote(raw))
    except BadRequest:
        return None
    asked = _block_of(url)
    return HmId(
        uid=found.uid,
        path=found.path,
        version=version or found.version,
        latest=found.latest if not version else False,
        block_ref=asked[0],
        block_range=asked[1],
    )


def _block_of(url: str) -> tuple[str | None, tuple[int, int] | None]:
    """The block a web URL's fragment names, if it names one (any other fragment is the page's own anchor)."""
    fragment = urlsplit(url).fragment
    parsed = parse_fragment(fragment) if fragment else None
    return (parsed[0], parsed[1]) if parsed else (None, None)


def read_seed_url(egress: Egress, url: str) -> dict[str, Any] | None:
    """Read a Seed document behind a web URL; None means "not hypermedia here", and the web reader takes over."""
    hm = hypermedia_id_of(egress, url)
    if hm is None:
        return None
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    wanted = HmId(uid=hm.uid, path=hm.path, version=hm.version, latest=hm.latest)
    with egress.open(f"{origin}/api/Resource", accept="application/json", params={"id": pack_hm_id(wanted)}) as r:
        if r.status == 404:
            return None
        if r.status != 200:
            raise Upstream(f"{origin} says {url} is a hypermedia document but its API answered HTTP {r.status}.")
        body = r.read(MAX_API_BYTES, refuse_over=True)
    try:
        envelope = json.loads(body.data)
    except ValueError:
        raise Upstream(f"{origin}/api/Resource answered with something that is not JSON.") from None
    resource = envelope.get("json") if isinstance(envelope, dict) else None
    if not isinstance(resource, dict):
        raise Upstream(f"{origin}/api/Resource answered without a resource.")
    kind = resource.get("type")
    if kind == "not-found":
        return None
    if kind == "tombstone":
        raise NotFound(f"The hypermedia document behind {url} was deleted.")
    if kind == "redirect":
        target = resource.get("redirectTarget") or resource.get("target")
        raise NotFound(f"{url} redirects to {_show(target)}; read that address instead.")
    if kind != "document":
        raise Upstream(f"{origin} could not serve {url} as a document (resource type {kind!r}).")
    return _document_result(url, wanted, hm, resource)


def _show(target: object) -> str:
    if isinstance(target, dict) and isinstance(target.get("id"), str):
        return str(target["id"])
    return str(target)


def _document_result(url: str, wanted: HmId, asked: HmId, document: dict[str, Any]) -> dict[str, Any]:
    content = document.get("content")
    tree = tree_from_json(content if isinstance(content, list) else [])
    raw_metadata = document.get("metadata")
    metadata: dict[str, Any] | None = raw_metadata if isinstance(raw_metadata, dict) else {}
    if asked.block_ref:
        found = find_block(tree, asked.block_ref)
        if found is None:
            raise NotFound(f"The document behind {url} has no block {asked.block_ref!r}.")
        tree, metadata = (found,), None
    markdown, truncated = bound_rendered(render_markdown(tree, metadata, frontmatter=metadata is not None))
    name = (raw_metadata or {}).get("name") if isinstance(raw_metadata, dict) else None
    hm_id = f"hm://{wanted.uid}" + "".join(f"/{s}" for s in wanted.path)
    data: dict[str, Any] = {
        "summary": f"Read {url} as the hypermedia document {hm_id} ({name or 'untitled'}).",
        "url": url,
        "requestedId": url,
        "id": hm_id,
        "version": document.get("version") or wanted.version,
        "name": name,
        "source": "hypermedia",
        "markdown": markdown,
    }
    if truncated:
        data["truncated"] = True
    return data
