"""`GET /ipfs/<cid>` on `serve --http`: files from the block store, the way a Seed node's `GetFile` serves them.

A file is reassembled from its blocks (a raw CID is its own bytes) and sent as `application/octet-stream` with
`ETag: "<cid>"` (the bytes can never change under it, so `If-None-Match` gets 304 and caches may keep it forever),
one `Range` (`bytes=a-b`, `a-`, `-n`) as 206 with `Content-Range` — only the blocks the range touches are read —
or 416 when it lies past the end, and `?filename=` as `Content-Disposition`. Asked for a raw block (`?format=raw` or
`Accept: application/vnd.ipld.raw`, the trustless-gateway form), it sends that one block, which is what another
harness's `read ipfs://` fetches (web/ipfs_fetch.py). A DAG-CBOR CID names a signed blob of the hypermedia store
(a Change, Ref, Comment, …): its exact bytes go out as a raw block, which is how another node pulls it and checks
it against the CID.

The route sits behind the same guard as `/mcp`: Host and Origin always, and the bearer token whenever tokens are
configured, unless `[hypermedia] public = true` makes the Seed API's reads (this one among them) public. The
blocks are public by intent (only publishing and verified downloads put them there), but a server with tokens has
said who may talk to it, and an endpoint that answers anyone would also tell anyone which CIDs this
server holds. Everything served is the user's bytes on the console's origin, so it goes out as an attachment-safe
download: `nosniff` and a sandboxing CSP, so an HTML file published here can never run as a page of the console.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

import anyio
from starlette.datastructures import Headers, QueryParams
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from mcp_harness.hypermedia.cid import CID, DAG_CBOR, DAG_PB, RAW
from mcp_harness.hypermedia.unixfs import InvalidBlock, decode_file_node, read_range
from mcp_harness.store.ipfs_blocks import IpfsBlockStore

if TYPE_CHECKING:
    from mcp_harness.harness import Harness

Admit = Callable[..., Awaitable[bool]]
"""`http.py`'s guard: `await admit(scope, receive, send)` is False once it has sent a refusal."""
RAW_BLOCK = "application/vnd.ipld.raw"
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
_SAFE = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "public, max-age=29030400, immutable",
}


class _Missing(Exception):
    pass


def ipfs_routes(harness: Harness, admit: Admit) -> list[BaseRoute]:
    """The `/ipfs/{cid}` route over the harness's block store and signed blobs, behind `admit` (without a token
    when `[hypermedia] public` says reads are public)."""
    blocks = IpfsBlockStore(harness.db)
    public = harness.settings.hypermedia.public

    def signed(cid: CID) -> bytes | None:
        return harness.hypermedia.store.data(str(cid))

    class Endpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if not await admit(scope, receive, send, public=public):
                return
            response = await _answer(blocks, scope, signed)
            await response(scope, receive, send)

    return [Route("/ipfs/{cid}", endpoint=Endpoint())]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _answer(blocks: IpfsBlockStore, scope: Scope, signed: Callable[[CID], bytes | None]) -> Response:
    method = scope["method"]
    if method not in ("GET", "HEAD"):
        return _error(405, "Only GET and HEAD are served at /ipfs/<cid>.", {"Allow": "GET, HEAD"})
    text = scope["path_params"]["cid"]
    try:
        cid = CID.parse(text)
    except ValueError as exc:
        return _error(400, f"{text!r} is not a CID: {exc}.")
    headers = Headers(scope=scope)
    query = QueryParams(scope.get("query_string", b""))
    if cid.codec == DAG_CBOR:  # a signed blob (Change, Ref, Comment, …): its exact bytes, as a Seed daemon serves it
        blob = await anyio.to_thread.run_sync(signed, cid) or await anyio.to_thread.run_sync(blocks.get, cid)
        if blob is None:
            return _error(404, f"This server holds no blob {cid}.")
        return Response(blob if method == "GET" else b"", media_type=RAW_BLOCK, headers=_block_headers(cid, blob))
    if query.get("format") == "raw" or RAW_BLOCK in headers.get("accept", ""):
        block = await anyio.to_thread.run_sync(blocks.get, cid)
        if block is None:
            return _error(404, f"This server holds no block {cid}.")
        return Response(block if method == "GET" else b"", media_type=RAW_BLOCK, headers=_block_headers(cid, block))
    size = await anyio.to_thread.run_sync(_file_size, blocks, cid)
    if size is None:
        return _error(404, f"This server holds no file {cid} (or not all of its blocks).")
    etag = f'"{cid}"'
    common = {**_SAFE, "ETag": etag, "Accept-Ranges": "bytes"}
    if (name := query.get("filename")) is not None:
        common["Content-Disposition"] = _disposition(name)
    if etag in (t.strip() for t in headers.get("if-none-match", "").split(",")):
        return Response(status_code=304, headers={k: v for k, v in common.items() if k != "Content-Disposition"})
    start, stop, status = 0, size, 200
    wanted = headers.get("range")
    if wanted is not None and (parsed := _range(wanted, size)) is not None:
        if isinstance(parsed, str):
            return _error(
                416, f"The range {wanted} lies outside the file ({size} bytes).", {"Content-Range": f"bytes */{size}"}
            )
        start, stop = parsed
        status = 206
        common["Content-Range"] = f"bytes {start}-{stop - 1}/{size}"
    common["Content-Length"] = str(stop - start)
    if method == "HEAD":
        return Response(status_code=status, headers=common, media_type="application/octet-stream")
    return StreamingResponse(
        _stream(blocks, cid, start, stop), status_code=status, headers=common, media_type="application/octet-stream"
    )


def _block_headers(cid: CID, block: bytes) -> dict[str, str]:
    return {**_SAFE, "ETag": f'"{cid}.raw"', "Content-Length": str(len(block))}


def _disposition(name: str) -> str:
    # Quotes and controls cannot break out of the quoted form; filename* carries the exact name for UTF-8 clients.
    plain = re.sub(r'[\x00-\x1f\x7f"\\]', "_", name).encode("ascii", "replace").decode("ascii")
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


def _range(header: str, size: int) -> tuple[int, int] | str | None:
    """`(start, stop)` of one `bytes=` range, "unsatisfiable", or None for a header to ignore (several ranges, or
    not understood: the whole file is sent, as RFC 9110 allows)."""
    found = _RANGE.match(header.strip())
    if found is None or (not found[1] and not found[2]):
        return None
    if not found[1]:  # the last n bytes
        last = int(found[2])
        return (max(size - last, 0), size) if last and size else "unsatisfiable"
    start = int(found[1])
    stop = min(int(found[2]) + 1, size) if found[2] else size
    if found[2] and int(found[2]) < start:
        return None
    return (start, stop) if start < size else "unsatisfiable"


def _file_size(blocks: IpfsBlockStore, cid: CID) -> int | None:
    """The file's size if every block of it is here (checked before a status line commits to a length)."""

    def present(block: CID) -> bytes:
        data = blocks.get(block)
        if data is None:
            raise _Missing(str(block))
        return data

    try:
        root = present(cid)
        if cid.codec == RAW:
            return len(root)
        if cid.codec != DAG_PB:
            return None
        # Inner nodes are read (a file of 100 MiB has three); leaves are only looked up.
        top = decode_file_node(root)
        stack = [top]
        while stack:
            for child in stack.pop().links:
                if child.codec == RAW:
                    if not blocks.has(child):
                        return None
                else:
                    stack.append(decode_file_node(present(child)))
        return top.filesize if top.filesize is not None else len(top.data) + sum(top.blocksizes)
    except (_Missing, InvalidBlock):
        return None


async def _stream(blocks: IpfsBlockStore, cid: CID, start: int, stop: int) -> AsyncIterator[bytes]:
    def fetch(block: CID) -> bytes:
        data = blocks.get(block)
        if data is None:
            raise InvalidBlock(f"block {block} went missing while it was served")
        return data

    pieces = read_range(cid, fetch, start, stop)
    sentinel = b""
    while piece := await anyio.to_thread.run_sync(next, pieces, sentinel):
        yield piece
