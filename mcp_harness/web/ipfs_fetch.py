"""Getting an IPFS file by CID: from the local block store, else from gateways, every byte checked against the CID.

Gateways are asked for blocks, the way the trustless-gateway spec serves them (`GET /ipfs/<cid>?format=raw`,
`Accept: application/vnd.ipld.raw`): each block is hashed against the CID that named it before it is decoded or
kept, and the children of a dag-pb node are asked for by the CIDs inside that verified node. So a gateway can fail
to serve a file, but never substitute one: a block that does not hash to its CID is refused, and the read fails
rather than return it. A Seed node answers `/ipfs/<cid>` with the whole file instead (its `GetFile`); then the file is
imported again here with the importer's parameters (the ones Seed uses) and taken only if that yields the CID asked
for. Verified blocks are kept in the local store, so the next read is local.

Every request goes through the guarded client (`web/egress.py`): a loopback or private gateway needs `[web]
allow_hosts`, like any fetch. Functions block; call them on a worker thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_harness.config import IpfsSettings
from mcp_harness.errors import HarnessError, NotFound, TooLarge, Upstream
from mcp_harness.hypermedia.cid import CID, RAW
from mcp_harness.hypermedia.unixfs import InvalidBlock, import_stream, read_file, verify_block
from mcp_harness.store.ipfs_blocks import BlockSink, IpfsBlockStore
from mcp_harness.web.egress import Egress

logger = logging.getLogger(__name__)

RAW_BLOCK = "application/vnd.ipld.raw"


@dataclass(frozen=True, slots=True)
class Fetched:
    """A verified file: its bytes, and where they came from ("local" or the gateway's base URL)."""

    data: bytes
    source: str


class _Missing(Exception):
    """A block the local store does not hold."""


def fetch_file(
    cid: CID, blocks: IpfsBlockStore, web: Egress, settings: IpfsSettings, *, first: Sequence[str] = ()
) -> Fetched:
    """The file `cid` names: local if every block is here, else from `first` and then `settings.gateways`.

    Raises:
        NotFound: no gateway has it (or none is configured).
        Upstream: a gateway sent a block or file that does not match its CID (refused), or failed.
        TooLarge: the file is over `[ipfs] max_file_bytes`.
    """
    limit = settings.max_file_bytes
    try:
        return Fetched(_assemble(cid, _local(blocks), limit), "local")
    except _Missing:
        pass
    gateways = list(dict.fromkeys([*first, *(g.rstrip("/") for g in settings.gateways)]))
    if not gateways:
        raise NotFound(
            f"ipfs://{cid} is not in this server's block store, and no gateway is configured to fetch it from "
            "([ipfs] gateways)."
        )
    failures: list[str] = []
    missing = 0
    for gateway in gateways:
        try:
            return Fetched(_from_gateway(cid, gateway, blocks, web, settings), gateway)
        except TooLarge:
            raise
        except NotFound as exc:
            missing += 1
            failures.append(exc.message)
        except HarnessError as exc:
            failures.append(exc.message)
    detail = " ".join(failures)
    if missing == len(gateways):
        raise NotFound(f"ipfs://{cid} was not found locally or at any gateway. {detail}")
    raise Upstream(f"Could not fetch ipfs://{cid}. {detail}")


def _local(blocks: IpfsBlockStore) -> Callable[[CID], bytes]:
    def get(cid: CID) -> bytes:
        data = blocks.get(cid)
        if data is None:
            raise _Missing(str(cid))
        return data

    return get


def _assemble(cid: CID, fetch: Callable[[CID], bytes], limit: int) -> bytes:
    try:
        return b"".join(read_file(cid, fetch, max_bytes=limit))
    except OverflowError:
        raise TooLarge(f"ipfs://{cid} is larger than {limit} bytes, the limit set by [ipfs] max_file_bytes.") from None


def _from_gateway(cid: CID, gateway: str, blocks: IpfsBlockStore, web: Egress, settings: IpfsSettings) -> bytes:
    with blocks.writer() as sink:
        root, is_block = _get(web, gateway, cid, settings, root=True)
        if not is_block:
            return _whole_file(cid, gateway, root, sink)
        _check(cid, root, gateway)
        sink(cid, root)
        local = _local(blocks)

        def fetch(child: CID) -> bytes:
            if child == cid:
                return root
            try:
                return local(child)
            except _Missing:
                data, raw = _get(web, gateway, child, settings)
                if not raw:
                    raise Upstream(f"{gateway} did not send block {child} as a raw block ({RAW_BLOCK}).") from None
                _check(child, data, gateway)
                sink(child, data)
                return data

        try:
            return _assemble(cid, fetch, settings.max_file_bytes)
        except InvalidBlock as exc:
            raise Upstream(f"{gateway} served ipfs://{cid} wrongly: {exc}.") from None


def _check(cid: CID, data: bytes, gateway: str) -> None:
    try:
        verify_block(cid, data)
    except InvalidBlock:
        logger.warning("refused block %s from %s: it does not hash to its CID", cid, gateway)
        raise Upstream(
            f"{gateway} sent a block for {cid} that does not hash to that CID; it was refused and nothing was kept."
        ) from None


def _whole_file(cid: CID, gateway: str, data: bytes, sink: BlockSink) -> bytes:
    """A Seed node's answer: the file itself, taken only if importing it gives back `cid`."""
    if cid.codec == RAW:
        _check(cid, data, gateway)
        sink(cid, data)
        return data
    rebuilt = import_stream([data]).cid
    if rebuilt != cid:
        logger.warning("refused file %s from %s: it imports as %s", cid, gateway, rebuilt)
        raise Upstream(
            f"{gateway} sent a file for ipfs://{cid} that does not import to that CID (it gives {rebuilt}); it was "
            "refused and nothing was kept."
        )
    import_stream([data], sink)
    return data


def _get(web: Egress, gateway: str, cid: CID, settings: IpfsSettings, *, root: bool = False) -> tuple[bytes, bool]:
    """One block (or, from a server that ignores `format=raw`, the whole file); whether it came as a raw block."""
    url = f"{gateway}/ipfs/{cid}"
    with web.open(url, accept=RAW_BLOCK, params={"format": "raw"}) as response:
        if response.status in (404, 410):
            raise NotFound(f"{gateway} does not have {cid} (HTTP {response.status}).")
        if response.status >= 400:
            raise Upstream(f"{gateway} answered HTTP {response.status} for {cid}.")
        is_block = response.content_type.split(";")[0].strip().lower() == RAW_BLOCK
        limit = settings.max_block_bytes if is_block or not root else settings.max_file_bytes
        try:
            body = response.read(limit, refuse_over=True)
        except TooLarge:
            if is_block:
                raise Upstream(
                    f"{gateway} sent a block for {cid} over {limit} bytes ([ipfs] max_block_bytes); refused."
                ) from None
            raise TooLarge(
                f"ipfs://{cid} is larger than {limit} bytes, the limit set by [ipfs] max_file_bytes."
            ) from None
        return body.data, is_block
