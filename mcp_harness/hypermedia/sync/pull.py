"""Pull: a document this node lacks (or wants fresh) is fetched from the configured Seed servers (issue 19 point 3).

The web API only *names* what to fetch; what is stored is always the raw blob a CID names, fetched by
`GET /ipfs/<cid>` and verified by `Node.ingest` (hash, structure, signature, writer capability) before anything of
it is kept. JSON is never taken as content. For `hm://<space>/<path>`, from the first server that has it:

1. `ListChanges?targetId=` — the CIDs of the document's Changes;
2. `Resource?id=` — its version (the heads) and genesis, and `ListEvents?filterResource=` for the Ref CIDs;
3. the raw blobs of all of them not held here, and the capability a non-owner's Ref names, ingested in pieces;
4. `ListComments?targetId=` — the comments' CIDs, their raw blobs, ingested apart (comments need no capability,
   and one bad comment must not cost the document).

Memory is bounded by the caps, not by what a server names: each raw blob is read under `[hypermedia]
max_blob_bytes`, and what is held at once under `max_request_bytes`. A document bigger than that is ingested in
dependency order (`pieces.Pieces`): what needs nothing beside it — genesis Changes, Changes by their document's creator,
IPFS blocks, comments — goes in as the cap fills, while the Refs, capabilities and other writers' Changes, which the
gate judges together, are held for the last piece (over the cap on their own, the pull stops with a clear error).
A server whose answer is refused (a blob over a cap or failing verification) is reported and the next one asked.

Pulled blobs go through `HypermediaStore.put` like local ones, so they feed the activity feed and its triggers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_harness.config import HmServerSettings
from mcp_harness.errors import HarnessError, NotFound, TooLarge
from mcp_harness.hypermedia.cid import CID, DAG_CBOR
from mcp_harness.hypermedia.node import Node, hm_url
from mcp_harness.hypermedia.sync.client import SeedClient, SeedHttpError
from mcp_harness.hypermedia.sync.pieces import Pieces, decoded
from mcp_harness.store.hypermedia import principal_account

logger = logging.getLogger(__name__)

MAX_BLOBS = 10_000
"""Most CIDs one pull fetches: a server naming more is not followed further."""


@dataclass(slots=True)
class PullReport:
    """What one pull did: where from, how many blobs were fetched and newly stored, and what failed."""

    target: str
    server: str | None = None
    fetched: int = 0
    stored: int = 0
    comments: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.target, "server": self.server, "fetched": self.fetched}
        out["stored"] = self.stored
        out["comments"] = self.comments
        if self.errors:
            out["errors"] = list(self.errors)
        return out


class Puller:
    """Pulls documents and their comments from `servers`, in order, through `client_for`'s clients. Blocking."""

    def __init__(
        self, node: Node, servers: Sequence[HmServerSettings], client_for: Callable[[HmServerSettings], SeedClient]
    ) -> None:
        self.node = node
        self.servers = list(servers)
        self.client_for = client_for

    def pull(self, space: str, path: str, *, comments: bool = True) -> PullReport:
        """Fetch the document from the first server that has it, verified and stored.

        Raises:
            NotFound: no server is configured, or none has it.
            BadRequest / TooLarge: what every server sent was refused (a blob failed verification or a cap), each
                server's reason named; no Ref of it was stored (a verified piece that needs none may have been).
        """
        target = hm_url(space, path)
        report = PullReport(target)
        if not self.servers:
            raise NotFound(f"{target} is not on this node, and no [[hypermedia.servers]] are configured to ask.")
        refusal: HarnessError | None = None
        for settings in self.servers:
            try:
                if self._pull_from(self.client_for(settings), space, path, report, comments):
                    report.server = settings.url
                    return report
            except HarnessError as error:
                # One server's bad answer (refused by the gate, over a cap) must not stop asking the others.
                report.errors.append(f"{settings.url}: {error.message}")
                if refusal is None and not isinstance(error, SeedHttpError) and error.status in (400, 413):
                    refusal = error
        tried = "; ".join(report.errors) or "none of them has it"
        if refusal is not None:  # a server sent something that failed verification: say so, do not hide it
            raise type(refusal)(f"{target} was not pulled: what the configured servers sent was refused ({tried}).")
        raise NotFound(f"{target} is not on this node, and the configured servers do not have it ({tried}).")

    def _pull_from(self, client: SeedClient, space: str, path: str, report: PullReport, comments: bool) -> bool:
        target = hm_url(space, path)
        listed = client.query("ListChanges", {"targetId": target})
        change_cids = _cids(listed.get("changes") if isinstance(listed, dict) else None)
        resource = client.query("Resource", {"id": target})
        kind = resource.get("type") if isinstance(resource, dict) else None
        if kind in ("not-found", "error") or (not change_cids and kind != "document"):
            return False
        wanted = list(dict.fromkeys([*change_cids, *_cids(resource), *self._ref_cids(client, target)]))
        pieces = Pieces(self.node, report)
        self._fetch(client, wanted, report, pieces.add)
        # A Ref by someone other than the space's owner needs its capability for the writer check: the one it names,
        # else those the server lists for the space.
        hints = [_capability_hint(data, space) for data, _ in pieces.late]
        if any(h is not None for h in hints):
            named = [h for h in hints if h]
            found = named or self._capability_cids(client, target, space)
            self._fetch(client, found, report, pieces.add, only="Capability")
        pieces.finish()  # the last piece, all or none: a Ref is judged together with its Changes and capability
        if self.node.ref(space, path) is None:
            report.errors.append(f"{client.base} listed {target} but sent no Ref for it")
            return False
        if comments:
            self._pull_comments(client, space, path, report)
        return True

    def _ref_cids(self, client: SeedClient, target: str) -> list[str]:
        """The CIDs a server's activity names for the document (its Ref events among them); best effort."""
        try:
            events = client.query("ListEvents", {"filterResource": target, "filterEventType": ["Ref"], "pageSize": 50})
        except SeedHttpError:
            return []
        return _cids(events)

    def _capability_cids(self, client: SeedClient, target: str, space: str) -> list[str]:
        """The CIDs of capabilities a server knows for the space: Seed's ListCapabilities, else the space owner's
        Capability events (a server without one answers 404; either may be missing)."""
        asks = (
            ("ListCapabilities", {"targetId": target}),
            ("ListEvents", {"filterAuthors": [space], "filterEventType": ["Capability"], "pageSize": 50}),
        )
        for key, params in asks:
            try:
                found = _cids(client.query(key, params))
            except SeedHttpError:
                continue
            if found:
                return found
        return []

    def _pull_comments(self, client: SeedClient, space: str, path: str, report: PullReport) -> None:
        target_id = {
            "id": hm_url(space, path),
            "uid": space,
            "path": [p for p in path.split("/") if p] or None,
            "version": None,
            "blockRef": None,
            "blockRange": None,
            "hostname": None,
            "scheme": "hm",
        }
        try:
            listed = client.query("ListComments", {"targetId": target_id})
        except SeedHttpError as error:
            report.errors.append(f"{client.base}: comments not listed: {error.message}")
            return
        found = listed.get("comments") if isinstance(listed, dict) else None
        entries = found if isinstance(found, list) else []
        cids = _cids([e.get("version") or e for e in entries if isinstance(e, dict)])
        pieces = Pieces(self.node, report, comments=True)

        def add(data: bytes, cid: str) -> None:
            if _is_comment_on(data, space, path):  # only comments on this document: nothing else rides along
                pieces.add(data, cid)

        try:
            self._fetch(client, cids, report, add)
            pieces.finish()
        except HarnessError as error:
            report.errors.append(f"{client.base}: comments refused: {error.message}")

    def _fetch(
        self,
        client: SeedClient,
        cids: Iterable[str],
        report: PullReport,
        take: Callable[[bytes, str], None],
        only: str | None = None,
    ) -> None:
        """Fetch the raw blobs of the CIDs not held here, one at a time, each under `max_blob_bytes`, and hand each
        to `take` (which verifies through `ingest`); with `only`, blobs of another type are dropped."""
        cap = self.node.max_blob_bytes
        for cid in list(cids)[:MAX_BLOBS]:
            if self.node.store.data(cid) is not None:
                continue
            data = client.raw(cid)
            if data is None:
                continue
            if len(data) > cap:  # the client reads under the cap; this holds for any client
                raise TooLarge(
                    f"{client.base} served {cid} as {len(data)} bytes, over the {cap}-byte limit of one blob "
                    "([hypermedia] max_blob_bytes); refused."
                )
            report.fetched += 1
            if only is None or decoded(data).get("type") == only:
                take(data, cid)


def _cids(value: object) -> list[str]:
    """Every dag-cbor CID named anywhere in a JSON value (a version `a.b` names two), in order, once each."""
    found: dict[str, None] = {}

    def walk(item: object) -> None:
        if isinstance(item, str):
            for part in item.removeprefix("blob-").split("."):  # a feed event's id is `blob-<cid>`
                if part.startswith("bafy") and len(part) > 40:
                    try:
                        if CID.parse(part).codec == DAG_CBOR:
                            found[part] = None
                    except ValueError:
                        pass
        elif isinstance(item, dict):
            for sub in item.values():  # pyright: ignore[reportUnknownVariableType]
                walk(sub)
        elif isinstance(item, list):
            for sub in item:  # pyright: ignore[reportUnknownVariableType]
                walk(sub)

    walk(value)
    return list(found)


def _capability_hint(data: bytes, space: str) -> str | None:
    """For a Ref signed by someone other than `space`'s owner: the capability CID it names, or "" when it names
    none. None for any other blob."""
    value = decoded(data)
    signer = value.get("signer")
    if value.get("type") != "Ref" or not isinstance(signer, bytes) or len(signer) != 34:
        return None
    if principal_account(signer) == space:
        return None
    hint = value.get("capability")
    return str(hint) if isinstance(hint, CID) else ""


def _is_comment_on(data: bytes, space: str, path: str) -> bool:
    value = decoded(data)
    if value.get("type") != "Comment":
        return False
    owner = value.get("space", value.get("signer"))
    on_space = isinstance(owner, bytes) and len(owner) == 34 and principal_account(owner) == space
    return on_space and str(value.get("path") or "") == path


__all__ = ["PullReport", "Puller"]
