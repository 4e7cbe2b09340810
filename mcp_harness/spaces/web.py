"""The `https://…` space: a public page through the guarded client, or the Seed document behind its URL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.spaces.space import Space
from mcp_harness.verbs.base import VerbContext, VerbResult

READ_OPTIONS = ("raw", "offset", "length")
"""What web/reader.py accepts (it refuses the rest in its own words; tests/spaces/test_spaces.py keeps both equal)."""


def read_web(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    """A public page as markdown through the guarded client (blocking: this runs on a worker thread); a Seed
    document behind an https URL is read as that document first (web/seed_sites.py)."""
    # Imported here: the guarded HTTP client loads on the first web read, not with every server start.
    from mcp_harness.web.reader import read_url

    if address.rest.lower().startswith("https://") and not options.get("raw"):
        from mcp_harness.web.seed_sites import read_seed_url

        document = read_seed_url(ctx.services.web, address.rest)
        if document is not None:
            return VerbResult.of(document, fmt=fmt) if fmt == "json" else VerbResult.of(document, document["markdown"])
    data = read_url(ctx.services.web, address.rest, options, ctx.services.settings.web.max_page_bytes)
    if fmt == "json":
        return VerbResult.of(data, fmt=fmt)
    return VerbResult.of(data, data["markdown"] or None)


def _fetches(address: Address, options: Mapping[str, Any]) -> bool:
    return True


SPACE = Space(
    name="web",
    kinds=("web",),
    read=read_web,
    read_options=READ_OPTIONS,
    network_read=_fetches,
    read_form="https://…",
    read_line="""- `https://...`: a web page as markdown, main content only (options raw, offset, length); a Seed site's URL reads as its document.""",  # noqa: E501
    read_details="""## `https://…` and `http://…`
- Fetches the page through the server's guarded client: every redirect hop is checked again, and loopback, private and link-local addresses are refused unless the owner allowed the host. At most `[web] max_page_bytes` (default 5 MiB) is downloaded; the rest is cut, with a notice.
- Result: {url (after redirects), title, contentType, charset, markdown}. HTML is cut to its main content (`role="main"`, else `<main>`, else the largest `<article>`, else `<body>`; navigation, headers, footers, scripts, styles, forms and boilerplate dropped) and converted to markdown with headings, lists, absolute links, fenced code and tables. Text types (plain, markdown, JSON, XML, YAML, …) come back as they are. A binary type gives its metadata and no content: download it with `write ~/memory/<path>` and `options.fromUrl`.
- Options: `raw: true` returns the text body verbatim (no conversion, no Seed lookup); `offset` (an integer ≥ 0) and `length` (an integer ≥ 1) select a window of the text, in characters. A read returns at most 200 KiB; when more remains it says so and gives `nextOffset`. Other option keys are refused.
- Hypermedia first: an `https://` URL that names a Seed document (a gateway URL `…/hm/<account>/<path>`, or a site that answers `OPTIONS` with `x-hypermedia-id`) is read as that document; only an explicit "not hypermedia" or a 404 falls through to the page reader.
- HTTP 404 and 410 read as not found; other HTTP errors, as upstream errors.""",  # noqa: E501
)
