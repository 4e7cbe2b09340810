"""Push: what the node publishes goes to the configured Seed servers, durably (issue 19 point 2).

`PushHook` runs inside `Node.publish`'s transaction and owes the new blobs — and the IPFS blocks of every file a new
Change links (`ipfs://…` in an Image, Video or File block) — to each `[[hypermedia.servers]]` entry with
`auto_push`, in the push queue (`store/hm_push.py`). Publishing never touches the network: the blobs are stored and
owed in one commit, and the write returns.

`Pusher` delivers: per server, the oldest due rows in enqueue order, sorted within a request so IPFS blocks go
first, then genesis Changes, Changes, other blobs, Refs and last Comments (a server indexes a Ref only once its
Changes are in). A request holds whole groups (one publish's rows, `store/hm_push.py`): a receiver judges a writer's
Change by the Ref beside it and refuses a Ref whose Changes it lacks, so a publish cut in two would be refused for
good. Only a group too big for one request is cut, and then only in rank order (its files' blocks, the one thing
needing no voucher, go ahead of its signed blobs). A 2xx deletes the
rows; a transport failure or 5xx keeps them and moves the server's next attempt out exponentially (1 s doubling to
5 min); a refusal that would recur (a 4xx other than auth and rate limiting) sets aside the blob the refusal
names (the whole request when it names none) and sends the rest again; `mcp-harness hm push` puts it back.

The worker runs beside the engine (`Harness.engine_running`), wakes when a publish commits in this process and polls
for the rest, so a restart — even after `kill -9` — resumes the queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus

from mcp_harness.config import HmServerSettings
from mcp_harness.errors import HarnessError
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cid import CID, DAG_PB, RAW
from mcp_harness.hypermedia.sync.client import SeedClient, SeedHttpError
from mcp_harness.hypermedia.unixfs import InvalidBlock, decode_file_node
from mcp_harness.store._util import now_ms
from mcp_harness.store.db import Database
from mcp_harness.store.hm_push import KIND_BLOB, KIND_BLOCK, PushQueue, QueuedBlob
from mcp_harness.store.ipfs_blocks import IpfsBlockStore

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 5.0
"""How often the worker looks for rows another process queued, or whose backoff ran out."""
BATCH = 200
"""Blobs per PublishBlobs request (also bounded by `[hypermedia] max_request_bytes`)."""
BASE_BACKOFF_MS = 1_000
MAX_BACKOFF_MS = 300_000
MEDIA_BLOCKS = frozenset({"Image", "Video", "File"})
RANK_BLOCK, RANK_GENESIS, RANK_CHANGE, RANK_OTHER, RANK_REF, RANK_COMMENT = range(6)


def rank_of(blob: Blob) -> int:
    """Where a blob goes in a request: what others point at before what points at it."""
    if blob.type == "Change":
        return RANK_CHANGE if "genesis" in blob.value else RANK_GENESIS
    return {"Ref": RANK_REF, "Comment": RANK_COMMENT}.get(blob.type, RANK_OTHER)


def push_items(blobs: Sequence[Blob], blocks: IpfsBlockStore) -> list[tuple[str, str, int]]:
    """The queue rows `(cid, kind, rank)` a publish owes: its blobs, and the blocks of the files its Changes link."""
    items: list[tuple[str, str, int]] = []
    for root in _linked_files(blobs):
        items.extend((cid, KIND_BLOCK, RANK_BLOCK) for cid in file_blocks(root, blocks))
    items.extend((str(b.cid), KIND_BLOB, rank_of(b)) for b in blobs)
    return items


def _linked_files(blobs: Iterable[Blob]) -> list[CID]:
    roots: dict[str, CID] = {}
    for blob in blobs:
        if blob.type != "Change":
            continue
        body = blob.value.get("body")
        ops: list[Any] = (body.get("ops") or []) if isinstance(body, dict) else []
        for op in ops:
            block: Any = op.get("block") if isinstance(op, dict) else None
            if not isinstance(block, dict) or block.get("type") not in MEDIA_BLOCKS:
                continue
            link = block.get("link")
            if isinstance(link, str) and link.startswith("ipfs://"):
                try:
                    cid = CID.parse(link.removeprefix("ipfs://").split("?", 1)[0].split("/", 1)[0])
                except ValueError:
                    continue
                roots[str(cid)] = cid
    return list(roots.values())


def file_blocks(root: CID, blocks: IpfsBlockStore) -> list[str]:
    """The CIDs of a file's blocks held here, leaves first; what is not held (a file linked, not uploaded here) is
    skipped: the server may have it from elsewhere."""
    out: list[str] = []
    stack = [root]
    seen: set[str] = set()
    while stack:
        cid = stack.pop()
        if str(cid) in seen or cid.codec not in (RAW, DAG_PB):
            continue
        seen.add(str(cid))
        data = blocks.get(cid)
        if data is None:
            continue
        if cid.codec == DAG_PB:
            try:
                stack.extend(decode_file_node(data).links)
            except InvalidBlock:
                continue
        out.append(str(cid))
    return list(reversed(out))


class PushHook:
    """`Node.publish_hooks` entry: owe what was published to every auto-push server, in publish's transaction."""

    def __init__(self, db: Database, servers: Sequence[HmServerSettings], wake: Callable[[], None]) -> None:
        self._db = db
        self._queue = PushQueue(db)
        self._blocks = IpfsBlockStore(db)
        self.servers = [s.url for s in servers if s.auto_push]
        self._wake = wake

    def __call__(self, published: Sequence[Blob]) -> None:
        if not self.servers or not published:
            return
        if self._queue.enqueue(self.servers, push_items(published, self._blocks)):
            self._db.after_commit(self._wake)


@dataclass(slots=True)
class PushReport:
    """One server's outcome of a pass."""

    server: str
    delivered: int = 0
    refused: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"server": self.server, "delivered": self.delivered}
        if self.refused:
            out["refused"] = self.refused
        if self.failed:
            out["failed"] = self.failed
        if self.errors:
            out["error"] = self.errors[-1]
        return out


class Pusher:
    """Delivers the push queue. `push_once` is one blocking pass; `serve` runs passes until cancelled."""

    def __init__(
        self,
        db: Database,
        servers: Sequence[HmServerSettings],
        client_for: Callable[[HmServerSettings], SeedClient],
        *,
        clock: Callable[[], int] = now_ms,
        poll_interval_s: float = POLL_INTERVAL_S,
        batch: int = BATCH,
        max_request_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        self.queue = PushQueue(db)
        self._db = db
        self._blocks = IpfsBlockStore(db)
        self.servers = list(servers)
        self.client_for = client_for
        self.clock = clock
        self.poll_interval_s = poll_interval_s
        self.batch = batch
        self.max_request_bytes = max_request_bytes
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup = anyio.Event()

    def wake(self) -> None:
        """Deliver now (after a publish committed). From any thread; never blocks."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wakeup.set)

    def push_once(self, *, force: bool = False, server: str | None = None) -> list[PushReport]:
        """Deliver every due row (every row, with `force`) of each server, request by request, until a server
        fails or has nothing left. Blocking."""
        reports: list[PushReport] = []
        for settings in self.servers:
            if server is not None and settings.url != server:
                continue
            reports.append(self._push_server(settings, force))
        return reports

    def _push_server(self, settings: HmServerSettings, force: bool) -> PushReport:
        report = PushReport(settings.url)
        client: SeedClient | None = None
        while True:
            rows = self.queue.due(settings.url, self.batch, now=self.clock(), force=force)
            if not rows:
                return report
            payload, settled = self._payload(rows)
            if payload:
                try:
                    client = client or self.client_for(settings)
                    client.publish([(cid, data) for cid, data in payload])
                except SeedHttpError as error:
                    if not error.permanent:
                        return self._failed(report, settings.url, rows, settled, error.message)
                    # A Seed refusal names the blob it refused: set aside that one, and send the rest again.
                    named = [r.seq for r in rows if r.seq in settled and r.cid in error.message]
                    culprits = named or settled
                    self.queue.refuse(settings.url, culprits, error.message)
                    report.refused += len(culprits)
                    report.errors.append(error.message)
                    continue
                except HarnessError as error:
                    return self._failed(report, settings.url, rows, settled, error.message)
            self.queue.delivered(settings.url, settled)
            report.delivered += len(payload)

    def _failed(
        self, report: PushReport, server: str, rows: list[QueuedBlob], seqs: list[int], error: str
    ) -> PushReport:
        attempts = max(r.attempts for r in rows)
        delay = min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** min(attempts, 20))
        # Every row of the server waits out the backoff, not just this request's: it is the server that failed.
        self.queue.failed(server, [r.seq for r in rows], error, self.clock() + delay)
        report.failed += len(seqs)
        report.errors.append(error)
        logger.info("Push to %s failed (%s); retrying in %.0f s", server, error, delay / 1000)
        return report

    def _payload(self, rows: list[QueuedBlob]) -> tuple[list[tuple[str, bytes]], list[int]]:
        """The rows' `(cid, bytes)` in request order — whole groups, under the request cap and `batch` rows (the
        rest waits for the next request) — and the seqs this request settles: those sent, and those whose bytes are
        gone (a GC'd block: nothing to send, ever). A first group over the cap goes in rank order, as much as fits."""
        groups: dict[int, list[QueuedBlob]] = {}
        for row in rows:
            groups.setdefault(row.group, []).append(row)
        out: list[tuple[QueuedBlob, bytes]] = []
        settled: list[int] = []
        size = 0
        for members in groups.values():
            loaded: list[tuple[QueuedBlob, bytes]] = []
            gone: list[int] = []
            group_size = 0
            cut = False
            for row in sorted(members, key=lambda r: (r.rank, r.seq)):
                data = self._blocks.get(row.cid) if row.kind == KIND_BLOCK else self._blob(row.cid)
                if data is None:
                    gone.append(row.seq)
                    continue
                if (loaded or out) and size + group_size + len(data) > self.max_request_bytes:
                    cut = True
                    break
                group_size += len(data)
                loaded.append((row, data))
            if out and (cut or len(out) + len(loaded) > self.batch):
                break  # the group waits for a request of its own, whole
            out += loaded
            settled += [r.seq for r, _ in loaded] + gone
            size += group_size
            if cut:
                break  # what points at the rest of the group must not go before it
        out.sort(key=lambda item: (item[0].rank, item[0].seq))
        return [(row.cid, data) for row, data in out], settled

    def _blob(self, cid: str) -> bytes | None:
        with self._db.reading() as conn:
            row = conn.execute("SELECT data FROM hm_blobs WHERE cid = ?", (cid,)).fetchone()
        return None if row is None else bytes(row["data"])

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Deliver until cancelled: at once, after each local publish, and every `poll_interval_s`."""
        self._loop = asyncio.get_running_loop()
        task_status.started()
        try:
            while True:
                self._wakeup = anyio.Event()
                delay = self.poll_interval_s
                try:
                    await anyio.to_thread.run_sync(self.push_once)
                    delay = await anyio.to_thread.run_sync(self._delay)
                except Exception:  # the worker outlives a failed pass (a locked database, a full disk)
                    logger.exception("A push pass failed; trying again shortly")
                with anyio.move_on_after(delay):
                    await self._wakeup.wait()
        finally:
            self._loop = None

    def _delay(self) -> float:
        soonest = self.queue.next_due()
        if soonest is None:
            return self.poll_interval_s
        return max(0.05, min(self.poll_interval_s, (soonest - self.clock()) / 1000))


def write_push_status(
    db: Database, servers: Sequence[HmServerSettings], published: Sequence[Blob]
) -> list[dict[str, Any]]:
    """What a write's result says of its push, per configured server: how many of its blobs (and its files' blocks)
    are queued there and how many in all the server is still owed (the push itself runs after the write commits, in
    the background), or that the server takes only `mcp-harness hm push`."""
    queue = PushQueue(db)
    mine = queue.pending_of([cid for cid, _, _ in push_items(published, IpfsBlockStore(db))])
    backlog = {b.server: b.pending for b in queue.backlog()}
    out: list[dict[str, Any]] = []
    for server in servers:
        if server.auto_push:
            out.append({"server": server.url, "queued": mine.get(server.url, 0), "pending": backlog.get(server.url, 0)})
        else:
            out.append({"server": server.url, "autoPush": False, "pending": backlog.get(server.url, 0)})
    return out


__all__ = ["PushHook", "PushReport", "Pusher", "file_blocks", "push_items", "rank_of", "write_push_status"]
