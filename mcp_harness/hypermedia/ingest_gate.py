"""The checks `Node.ingest` runs on blobs from elsewhere before any is stored (issue 19 point 6).

Three layers, each refusing the whole batch at the first failure and naming the blob and why: sizes (one blob,
the batch), then each blob on its own (hash against the CID given, DAG-CBOR structure and signature through
`blobs.verify_blob`; raw and dag-pb IPFS blocks by hash alone), then authority across the batch — a Ref signed by
someone other than its space's owner needs a WRITER/AGENT capability from the owner covering its path, in the batch
itself or already held, as Go's `isValidWriter` demands; a Change signed by someone other than its document's
creator needs the same for a document the batch's Refs place it in (or a Ref by a writer naming it as a head).
A capability without a WRITER or AGENT role grants nothing. A Ref whose heads are neither in the batch nor held is
refused: stored, it would make a document this node could read unreadable (a push cut in two, or a server serving a
newer Ref while withholding its Changes). Comments need nothing: anyone may comment on any document.

Each signed blob is first decoded under an allocation budget (`cbor.budget_for`), so a blob of a few megabytes
cannot cost hundreds of megabytes of Python objects before it is refused.

Why a Change is judged through Refs: a Change names its genesis, not its space or path; the only statement of where
it belongs is a Ref. A stranger's Change with no Ref to vouch for it is refused rather than kept dangling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from mcp_harness.errors import BadRequest, TooLarge
from mcp_harness.hypermedia import blobs, cbor
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.cid import CID, DAG_PB, RAW
from mcp_harness.hypermedia.unixfs import InvalidBlock, verify_block
from mcp_harness.store.hypermedia import principal_account

WRITE_ROLES = frozenset({"WRITER", "AGENT"})
"""The Capability roles that let a delegate write (Go's `isValidWriter`); any other, or none, grants nothing."""


class WriterIndex(Protocol):
    """What the writer check reads from the store (`HypermediaStore`)."""

    def has_capability(self, space: str, delegate: str, path: str) -> bool: ...
    def data(self, cid: str) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class Checked:
    blobs: list[Blob]
    """Signed blobs, verified one by one."""
    blocks: list[tuple[CID, bytes]]
    """IPFS blocks (raw, dag-pb), hash-checked."""


def verify_items(items: Sequence[tuple[bytes, str | None]], blob_cap: int, request_cap: int) -> Checked:
    """Sizes, then each blob's hash, structure and signature. Raises TooLarge or BadRequest naming the blob."""
    total = sum(len(data) for data, _ in items)
    if total > request_cap:
        raise TooLarge(
            f"{len(items)} blobs of {total} bytes in all are over the {request_cap}-byte limit of one request "
            "([hypermedia] max_request_bytes); send them in smaller batches."
        )
    verified: list[Blob] = []
    blocks: list[tuple[CID, bytes]] = []
    for position, (data, cid) in enumerate(items, 1):
        label = cid or f"#{position} (sent without a CID)"
        if len(data) > blob_cap:
            raise TooLarge(
                f"Blob {label} is {len(data)} bytes, over the {blob_cap}-byte limit of one blob "
                "([hypermedia] max_blob_bytes); it was refused and nothing of this batch was stored."
            )
        try:
            parsed = CID.parse(cid) if cid else None
        except ValueError as error:
            raise BadRequest(f"Blob {label} refused, and nothing of this batch stored: not a CID ({error}).") from None
        try:
            if parsed is not None and parsed.codec in (RAW, DAG_PB):
                try:
                    verify_block(parsed, bytes(data))
                except InvalidBlock as bad:
                    raise BadRequest(f"{bad}.") from None
                blocks.append((parsed, bytes(data)))
                continue
            try:
                cbor.decode(data, budget=cbor.budget_for(len(data)))
            except ValueError as bad:
                raise BadRequest(f"{bad}.") from None
            verified.append(blobs.verify_blob(data, parsed))
        except BadRequest as error:
            raise BadRequest(f"Blob {label} refused, and nothing of this batch stored: {error.message}") from None
    return Checked(verified, blocks)


def check_writers(verified: Sequence[Blob], store: WriterIndex) -> None:
    """Refuse a Ref or Change whose signer may not write where it lands. Raises BadRequest naming the blob."""
    caps = [
        (b.author, principal_account(b.value["delegate"]), str(b.value.get("path") or ""), b.value.get("role"))
        for b in verified
        if b.type == "Capability" and b.value.get("role") in WRITE_ROLES  # a roleless one grants no write
    ]

    def allowed(space: str, signer: str, path: str) -> bool:
        if space == signer:
            return True
        for owner, delegate, scope, role in caps:
            covers = role == "AGENT" or not scope or path == scope or path.startswith(scope + "/")
            if owner == space and delegate == signer and covers:
                return True
        return store.has_capability(space, signer, path)

    in_batch = {str(b.cid): b for b in verified}
    documents: dict[str, list[tuple[str, str]]] = {}  # genesis → the (space, path) the batch's Refs give it
    endorsed: set[str] = set()  # heads named by a Ref whose signer may write where it points
    for ref in (b for b in verified if b.type == "Ref"):
        value = ref.value
        space = principal_account(value["space"]) if "space" in value else ref.author
        path = str(value.get("path") or "")
        if not allowed(space, ref.author, path):
            raise BadRequest(
                f"Blob {ref.cid} refused, and nothing of this batch stored: a Ref for hm://{space}{path} signed by "
                f"{ref.author}, who is not that space's owner and holds no WRITER capability from it covering "
                f"{path or 'the home document'}; expected the owner's signature or a capability."
            )
        heads = [str(h) for h in value.get("heads") or ()]
        missing = [h for h in heads if h not in in_batch and store.data(h) is None]
        if missing:
            raise BadRequest(
                f"Blob {ref.cid} refused, and nothing of this batch stored: a Ref for hm://{space}{path} names the "
                f"head {missing[0]}, which is neither in this batch nor held here; send the Changes a Ref points at "
                "with it or before it."
            )
        if isinstance(value.get("genesisBlob"), CID):
            documents.setdefault(str(value["genesisBlob"]), []).append((space, path))
        endorsed.update(heads)
    for change in (b for b in verified if b.type == "Change" and "genesis" in b.value):
        genesis = str(change.value["genesis"])
        creator = _signer_of(genesis, in_batch, store)
        if change.author == creator or str(change.cid) in endorsed:
            continue
        homes = documents.get(genesis) or ([(creator, "")] if creator else [])
        if not any(allowed(space, change.author, path) for space, path in homes):
            where = f"a document started by {creator}" if creator else f"genesis {genesis} (not held here)"
            raise BadRequest(
                f"Blob {change.cid} refused, and nothing of this batch stored: a Change to {where} signed by "
                f"{change.author}, who neither started it nor holds a WRITER capability for it; expected the "
                "owner's signature, a capability, or a Ref by a writer naming it."
            )


def _signer_of(cid: str, in_batch: dict[str, Blob], store: WriterIndex) -> str | None:
    found = in_batch.get(cid)
    if found is not None:
        return found.author
    data = store.data(cid)
    if data is None:
        return None
    value = decode(data)
    signer = value.get("signer") if isinstance(value, dict) else None
    return principal_account(signer) if isinstance(signer, bytes) and len(signer) == 34 else None


__all__ = ["WRITE_ROLES", "Checked", "WriterIndex", "check_writers", "verify_items"]
