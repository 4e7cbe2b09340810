"""The `ipfs://` space: publish bytes as a UnixFS file, and fetch one by CID into memory (HARNESS §11.2, §12;
HYPERMEDIA §5).

`write ipfs://` imports `content`, a memory file (`options.fromPath`) or an attachment (`options.fromAttachment`)
with the importer Seed uses (hypermedia/unixfs.py), so the CID is the one any Seed node computes for those bytes,
and keeps the blocks in this server's block store, from which `serve --http` answers `GET /ipfs/<cid>`. Publishing is
a public disclosure, so it needs the publish grant; `dryRun: true` computes the CID and stores nothing.

`read ipfs://<cid>` (or a bare CID, or any `…/ipfs/<cid>` URL) saves the file into memory: from the block store
when it is here, else from `[ipfs] gateways` (a gateway URL's own host first), every block checked against its CID
as it arrives (web/ipfs_fetch.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.errors import BadRequest, Forbidden
from mcp_harness.spaces.space import ResourceBody, ResourceForm, Space
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

READ_OPTIONS = ("path",)
WRITE_OPTIONS = ("fromPath", "fromAttachment")
RESOURCE_MAX_BYTES = 8 * 1024 * 1024
"""Largest file `resources/read` returns inline (base64 in one message); larger ones are saved with `read`."""
_GATEWAY = re.compile(r"^(?P<base>https?://[^/?#]+)/ipfs/(?P<rest>.*)$", re.IGNORECASE)


def parse_ipfs_cid(text: str) -> tuple[Any, str | None]:
    """The CID an address names (`ipfs://<cid>`, `ipfs:<cid>`, a bare CID, `/ipfs/<cid>`, a gateway URL), and the
    gateway base URL when it is one.

    Raises:
        BadRequest: no CID, an invalid one, or a path inside it (directories are not read here).
    """
    from mcp_harness.hypermedia.cid import CID

    raw = text.strip()
    gateway: str | None = None
    lowered = raw.lower()
    if lowered.startswith("ipfs://"):
        rest = raw[len("ipfs://") :]
    elif lowered.startswith("ipfs:"):
        rest = raw[len("ipfs:") :].removeprefix("/ipfs/")
    elif (found := _GATEWAY.match(raw)) is not None:
        gateway, rest = found["base"], found["rest"]
    else:
        rest = raw.removeprefix("/ipfs/")
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    cid_text, _, inner = rest.partition("/")
    if not cid_text:
        raise BadRequest("read ipfs:// needs a CID: ipfs://<cid>, e.g. ipfs://bafkrei…")
    if inner.strip("/"):
        raise BadRequest(
            f"{raw} names a path inside {cid_text}; only a file's own CID is read here (ipfs://<cid>), not a "
            "directory entry."
        )
    try:
        return CID.parse(cid_text), gateway
    except ValueError as exc:
        raise BadRequest(f"{cid_text!r} is not a CID: {exc}.") from None


def _fetch(ctx: VerbContext, address: Address) -> tuple[Any, Any]:
    from mcp_harness.store.ipfs_blocks import IpfsBlockStore
    from mcp_harness.web.ipfs_fetch import fetch_file

    cid, gateway = parse_ipfs_cid(address.rest)
    services = ctx.services
    first = (gateway,) if gateway else ()
    return cid, fetch_file(cid, IpfsBlockStore(services.db), services.web, services.settings.ipfs, first=first)


def read_ipfs(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    """Fetch and verify the file, then save it into memory (atomically) at `options.path` or `ipfs/<cid>`."""
    from mcp_harness.memory.paths import normalize_memory_path

    refuse_unknown_options("read ipfs://", options, READ_OPTIONS)
    cid, _ = parse_ipfs_cid(address.rest)
    wanted = options.get("path")
    if wanted is not None and not isinstance(wanted, str):
        raise BadRequest("read ipfs:// options.path must be a memory path, e.g. ~/memory/downloads/photo.jpg.")
    path = normalize_memory_path((wanted or f"ipfs/{cid}").strip().removeprefix("~/memory/"))
    _, fetched = _fetch(ctx, address)
    entry = ctx.services.memory(ctx.agent).write_file(path, fetched.data)
    origin = "this server's block store" if fetched.source == "local" else fetched.source
    data = {
        "summary": f"Saved ipfs://{cid} ({entry.size} bytes, from {origin}, every block verified) to ~/memory/{path}.",
        "cid": str(cid),
        "url": f"ipfs://{cid}",
        "path": path,
        "size": entry.size,
        "mimeType": entry.mime_type,
        "source": fetched.source,
    }
    return VerbResult.of(data, fmt=fmt)


def write_ipfs(
    ctx: VerbContext, address: Address, content: object, options: dict[str, Any], dry_run: bool
) -> VerbResult:
    """Publish `content`, `options.fromPath` or `options.fromAttachment` as a UnixFS file."""
    from mcp_harness.grants import may
    from mcp_harness.spaces.hm.write import PUBLISH_REFUSAL
    from mcp_harness.spaces.ipfs_sources import attachment_source, memory_source, upload

    rest = re.sub(r"^ipfs:(//)?", "", address.rest.strip(), flags=re.IGNORECASE)
    if rest.strip("/"):
        raise BadRequest(
            f"write publishes to ipfs:// itself (the CID comes from the bytes), not to {address.raw}. Use address "
            "ipfs:// with content, options.fromPath or options.fromAttachment."
        )
    refuse_unknown_options("write ipfs://", options, WRITE_OPTIONS)
    if not may(ctx.services, ctx.agent.definition, "publish"):
        raise Forbidden(PUBLISH_REFUSAL)
    given = [name for name, value in (("content", content), *options.items()) if value is not None]
    if len(given) != 1:
        problem = "nothing to publish" if not given else f"{' and '.join(given)} given together"
        raise BadRequest(
            f"write ipfs:// publishes exactly one of content (text), options.fromPath (a memory file) or "
            f"options.fromAttachment (an attachment id): {problem}."
        )
    if given == ["content"]:
        if not isinstance(content, str):
            raise BadRequest("write ipfs:// content must be text; publish binary files with options.fromPath.")
        source: Any = content.encode("utf-8", "surrogatepass")
        label = "content"
    elif given == ["fromPath"]:
        source = memory_source(ctx, options["fromPath"])
        label = source.label
    else:
        source = attachment_source(ctx, options["fromAttachment"])
        label = source.label
    imported = upload(ctx, source, dry_run=dry_run)
    url = f"ipfs://{imported.cid}"
    if dry_run:
        summary = f"Dry run: {label} ({imported.size} bytes) would publish as {url}. Nothing was stored."
    else:
        summary = (
            f"Published {label} ({imported.size} bytes) as {url}. It is public: anyone with the CID can fetch it "
            "from this server's /ipfs/ endpoint, and it can be linked from documents."
        )
    data = {"summary": summary, "url": url, "cid": str(imported.cid), "size": imported.size, "dryRun": dry_run}
    return VerbResult.of(data)


def ipfs_resource(ctx: VerbContext, address: Address) -> ResourceBody:
    """The file's bytes (verified), as text when they are UTF-8, else as a blob."""
    from mcp_harness.errors import TooLarge

    cid, fetched = _fetch(ctx, address)
    data: bytes = fetched.data
    if len(data) > RESOURCE_MAX_BYTES:
        raise TooLarge(
            f"ipfs://{cid} is {len(data)} bytes, more than a resource returns ({RESOURCE_MAX_BYTES}); save it into "
            "memory with read ipfs://<cid> instead."
        )
    if b"\x00" not in data:
        try:
            return ResourceBody("text/plain", text=data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return ResourceBody("application/octet-stream", blob=data)


def _network(address: Address, options: Mapping[str, Any]) -> bool:
    return True  # a read may fetch from gateways; a write may stream a large file: neither holds the database


SPACE = Space(
    name="ipfs",
    kinds=("ipfs",),
    read=read_ipfs,
    read_options=READ_OPTIONS,
    network_read=_network,
    read_form="ipfs://<cid>",
    read_line="""- `ipfs://<cid>` (or a bare CID, or a gateway URL …/ipfs/<cid>): download a file into memory at options.path (default ipfs/<cid>), every block verified against the CID.""",  # noqa: E501
    read_details="""## `ipfs://<cid>`
Downloads a UnixFS file into your memory: at `options.path` (a memory path), else `ipfs/<cid>`, written atomically. A bare CID, `ipfs:<cid>`, `/ipfs/<cid>` and a gateway URL `https://<host>/ipfs/<cid>` name the same thing.
- It comes from this server's block store when every block is here, else from the configured gateways and Seed nodes (`[ipfs] gateways`; a gateway URL's own host is tried first), through the guarded client. Every block is hashed against its CID as it arrives; a block that does not match is refused and the read fails, with nothing saved. Verified blocks are kept, so the next read is local.
- At most `[ipfs] max_file_bytes` (default 100 MiB). Directories and paths inside a CID are not read.
- Result: {cid, url, path, size, mimeType, source ("local" or the gateway)}. Read the saved file with `read ~/memory/<path>`.""",  # noqa: E501
    write=write_ipfs,
    write_options=WRITE_OPTIONS,
    network_write=_network,
    dry_run=True,
    write_form="ipfs://",
    write_line="""- `ipfs://`: publish `content`, options.fromPath (a memory file) or options.fromAttachment (an attachment id) as a public IPFS file (needs the publish grant); returns its ipfs://<cid>. `dryRun: true` only computes the CID.""",  # noqa: E501
    write_details="""## `ipfs://`
Publishes one file as UnixFS — 256 KiB raw-leaf chunks, CIDv1, a balanced tree of 174 links a node, exactly as the Seed client and a Seed node import it, so the CID is the one they compute — and keeps its blocks in this server's block store, served at `GET /ipfs/<cid>` by `serve --http`. The address is `ipfs://` alone.
- Exactly one source: `content` (text, as UTF-8), `options.fromPath` (a file in ~/memory) or `options.fromAttachment` (an attachment id of this conversation). At most `[ipfs] max_file_bytes`.
- Needs the publish grant: publishing is public and cannot be taken back. `dryRun: true` computes the CID and stores nothing.
- Result: {summary, url: "ipfs://<cid>", cid, size, dryRun}. Link it from a document as an Image/Video/File block, or a profile's avatar.""",  # noqa: E501
    resources=(
        ResourceForm(
            "ipfs",
            "IPFS file",
            "ipfs://{cid}",
            "A UnixFS file by CID, from the block store or the configured gateways, verified block by block.",
        ),
    ),
    resource_read=ipfs_resource,
)
