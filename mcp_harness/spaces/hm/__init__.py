"""The `hm://` space: signed documents on the embedded hypermedia node (read.py, write.py and their helpers).

This package module is the space's declaration; its handlers are not named `read` and `write`, which are the
submodules. They load the hypermedia modules on first use: those cost a server start a fifth of a second, and
write.py reaches verbs/contracts.py (through grants.py), which builds the read and write contracts from this
declaration.
"""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.spaces.hm.options import (
    ACTION_OPTIONS,
    BASE_OPTIONS,
    FROM_PATH_OPTIONS,
    READ_OPTIONS,
    WRITE_OPTIONS,
)
from mcp_harness.spaces.space import ResourceBody, ResourceForm, Space
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

__all__ = ["ACTION_OPTIONS", "BASE_OPTIONS", "FROM_PATH_OPTIONS", "READ_OPTIONS", "SPACE", "WRITE_OPTIONS"]


def read_document(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    from mcp_harness.spaces.hm.read import read_hm

    refuse_unknown_options("read hm://", options, READ_OPTIONS)
    return read_hm(ctx, address.rest, fmt, options)


def write_document(
    ctx: VerbContext, address: Address, content: object, options: dict[str, Any], dry_run: bool
) -> VerbResult:
    from mcp_harness.spaces.hm.write import write_hm

    return write_hm(ctx, address.rest, content, options, dry_run)


def document_resource(ctx: VerbContext, address: Address) -> ResourceBody:
    """The document itself, as the client would save or show it (else the read's text: a view, a comment)."""
    from mcp_harness.spaces.hm.read import read_hm

    result = read_hm(ctx, address.rest, "markdown")
    markdown = result.data.get("markdown")
    return ResourceBody("text/markdown", markdown if isinstance(markdown, str) else result.text)


SPACE = Space(
    name="hm",
    kinds=("hm",),
    read=read_document,
    read_options=READ_OPTIONS,
    read_form="hm://<account>/<path>[?v=…][#block] (views /:directory, /:attributes, /:profile, /:comments)",
    read_line="""- `hm://<account>/<path>`: a signed document as markdown with block ids; `?v=<version>`, `#<block>`, views `/:directory`, `/:attributes`, `/:profile`, `/:comments`; `hm://<author>/<tsid>` is a comment.""",  # noqa: E501
    read_details="""## `hm://<account>/<path>`
A signed document on this server's embedded hypermedia node.
- The text result is markdown in Seed's dialect: frontmatter and `<!-- id:… -->` block markers, so what you read can be edited and written back with its block ids intact. Embeds are resolved two levels deep; the rendering is kept to 262,144 characters (then `truncated: true`). `format: "json"` returns the block tree instead.
- `?v=<version>` reads an older version; `#<block>` one block; `#<block>[start:end]` part of its text (code-point offsets).
- `hm://<author>/<tsid>` reads a comment.
- Views: `/:directory` (child documents, in path order, a page of at most `options.limit` — 1 to 500, default 100 — with `totalDocuments`, and `nextCursor` while more remain: pass it as `options.cursor`), `/:attributes` (metadata only), `/:profile` (an account's profile), `/:comments` (the document's comments, oldest first, paged the same way, with `totalComments`).
- `options.fresh: true` first asks the configured Seed servers for the document (a document this node lacks is always asked for); what they send is verified before it is stored, and the result's `pulled` says what came. Other options than the `cursor` and `limit` of `/:directory` and `/:comments` are refused.
- Every result carries `requestedId` as asked, the canonical `id` and the `version` read; after a redirect, also `redirectedFrom`.""",  # noqa: E501
    write=write_document,
    write_options=WRITE_OPTIONS,
    dry_run=True,
    write_form="hm://<account>/<path> (markdown content; options.action document | update | comment | move | redirect "
    "| delete | fork)",
    write_line="""- `hm://<account>/<path>`: publish a signed document from markdown `content` (needs the publish grant and a signing identity). options.action: document (default: create), update, comment, move, redirect, delete, fork; options.fromPath publishes a memory file; `dryRun: true` checks without publishing.""",  # noqa: E501
    write_details="""## `hm://<account>/<path>`
Publishes signed hypermedia (canonical DAG-CBOR blobs, Ed25519) on this server's embedded node, as one of your signing identities: the account in the address picks it, or `options.signer` (a profile name or public key). Needs the publish grant. `content` is markdown in Seed's dialect (frontmatter, `<!-- id:… -->` block markers, nested headings, lists, code, math, images, `<hm://…>` embeds, tables), at most 256 KiB; metadata is at most 16 KiB encoded.
`options.action`:
- `document` (default): create. A name is required — `options.name`, `options.metadata.name` or a `name:` frontmatter line — and a nested path needs its parent. Options name, metadata.
- `update`: a new version. `content` replaces the body, keeping the ids of the blocks that survive; without `content`, only metadata changes (name, metadata; a null value removes a metadata key).
- `comment`: `content` is the comment, on the addressed document or on `options.target` (an hm:// address, optionally `?v=`); `options.replyTo` (a comment id `<author>/<tsid>`) answers a comment on the same document.
- `move`: `options.toPath`, within the same account; the old address redirects there. The home document cannot move.
- `redirect`: `options.toUrl` (an hm:// document). A loop, or a chain longer than readers follow (5), is refused; so is a missing or deleted target unless `skipLinkCheck`.
- `delete`: removes the document (the home document cannot be deleted).
- `fork`: copies `options.fromUrl` (an hm:// document, optionally `?v=`) to the address, which must be free; name and metadata rename the copy.
- `profile.update` (address `hm://<account>`): republishes the account's profile from options name, metadata or input ({name, avatar, description}).
move, redirect, delete, fork and profile.update take no `content`. `options.fromPath` (a markdown file in ~/memory, with only `signer` beside it) publishes that file, creating or updating the document. Every `hm://` link in the content is checked before anything is signed; `skipLinkCheck: true` allows links to what is not published yet. Unknown option keys are refused by name: extra command fields go in `options.input`, never as loose keys.
`dryRun: true` runs every check and builds every blob, then stores nothing. Result: {action, id, version?, name?, signer, dryRun, blobs, push?} and the action's own fields; `push` (with `[[hypermedia.servers]]` configured) gives per server what was queued and is pending — the push runs in the background.""",  # noqa: E501
    resources=(
        ResourceForm(
            "hypermedia",
            "Hypermedia document",
            "hm://{account}/{path}",
            "A signed document on the embedded node as Seed markdown with block ids (also ?v=, #block, and the "
            "/:directory, /:attributes, /:profile, /:comments views), or a comment hm://{author}/{tsid}.",
            "text/markdown",
        ),
    ),
    resource_read=document_resource,
)
