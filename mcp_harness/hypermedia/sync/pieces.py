"""Fetched blobs held for ingest under `[hypermedia] max_request_bytes`, in dependency-ordered pieces (the pull).

What needs nothing beside it to pass the gate — genesis Changes, Changes signed by their document's creator, IPFS
blocks, comments, profiles — is ingested as a piece whenever the cap fills, so it is stored before what points at
it. Refs, capabilities and other writers' Changes are judged together by the gate (a writer's Change by the Ref
that places it, a Ref by its capability and its heads), so they are held for the last piece; over the cap on their
own, the pull stops with a clear error rather than hold more.
"""

from __future__ import annotations

from typing import Any, Protocol

from mcp_harness.errors import TooLarge
from mcp_harness.hypermedia.cbor import budget_for, decode
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.node import Node
from mcp_harness.store.hypermedia import principal_account


class Counts(Protocol):
    """What `Pieces` counts into (the pull's report)."""

    stored: int
    comments: int


class Pieces:
    """Fetched blobs held until ingested, never more than `max_request_bytes` at once (see the module doc)."""

    def __init__(self, node: Node, report: Counts, *, comments: bool = False) -> None:
        self.node = node
        self.report = report
        self.comments = comments
        self.cap = node.max_request_bytes
        self.early: list[tuple[bytes, str | None]] = []
        self.late: list[tuple[bytes, str | None]] = []
        self.size = 0
        self.late_size = 0
        self.creators: dict[str, str | None] = {}  # genesis CID → its signer

    def add(self, data: bytes, cid: str) -> None:
        value = decoded(data)
        if value.get("type") == "Change" and "genesis" not in value:
            self.creators[cid] = signer_of(value)
        if self._judged_together(value):
            if self.late_size + len(data) > self.cap:
                raise TooLarge(
                    f"The Refs, capabilities and other writers' Changes of this document are over the "
                    f"{self.cap}-byte limit of one request ([hypermedia] max_request_bytes); they must be ingested "
                    "together, so the pull stopped."
                )
            if self.size + len(data) > self.cap:
                self._flush()
            self.late.append((data, cid))
            self.late_size += len(data)
            self.size += len(data)
            return
        if self.size + len(data) > self.cap:
            self._flush()
        if self.size + len(data) > self.cap:
            self._ingest([(data, cid)])  # alone: it needs nothing beside it
            return
        self.early.append((data, cid))
        self.size += len(data)

    def _flush(self) -> None:
        """Ingest a piece: what needs nothing beside it, stored before what points at it."""
        self._ingest(self.early)
        self.early = []
        self.size = self.late_size

    def finish(self) -> None:
        self._ingest(self.early + self.late)
        self.early, self.late, self.size, self.late_size = [], [], 0, 0

    def _ingest(self, items: list[tuple[bytes, str | None]]) -> None:
        if not items:
            return
        self.node.ingest(items)
        self.report.stored += len(items)
        if self.comments:
            self.report.comments += len(items)

    def _judged_together(self, value: dict[str, Any]) -> bool:
        kind = value.get("type")
        if kind in ("Ref", "Capability"):
            return True
        if kind != "Change":
            return False
        signer = signer_of(value)
        genesis = value.get("genesis")
        if not isinstance(genesis, CID):
            return False  # a genesis Change: everything of its document points at it
        key = str(genesis)
        if key not in self.creators:
            held = self.node.store.data(key)
            self.creators[key] = signer_of(decoded(held)) if held is not None else None
        creator = self.creators[key]
        return creator is None or creator != signer


def decoded(data: bytes) -> dict[str, Any]:
    try:
        value = decode(data, budget=budget_for(len(data)))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def signer_of(value: dict[str, Any]) -> str | None:
    signer = value.get("signer")
    return principal_account(signer) if isinstance(signer, bytes) and len(signer) == 34 else None


__all__ = ["Counts", "Pieces", "decoded", "signer_of"]
