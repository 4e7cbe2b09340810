"""The durable push queue: blobs owed to each configured Seed server (issue 19).

A row is one blob (or one IPFS block of a file a document links) that one server has not yet acknowledged. Rows are
written in the same transaction as the publish that made the blobs (`hypermedia/sync/push.py` hooks `Node.publish`),
so a blob is either stored *and* owed, or neither: a crash between the two cannot lose a push. Delivery deletes the
rows a server acknowledged; a failure moves the server's due time on (exponential backoff) and keeps the rows, so a
restart resumes exactly where the last attempt stopped. `seq` is enqueue order: a publish enqueues its genesis and
Changes before the Ref that points at them, and the worker sends in that order. `grp` names the enqueue a row came
with (one publish, one `hm push DOC`): the worker never cuts a group's signed blobs across requests, because a
receiver judges a writer's Change by the Ref beside it and refuses a Ref whose Changes it lacks.

A server that *refuses* a blob (a 4xx other than auth or rate limiting) would refuse it forever: those rows are set
aside (`refused` with the reason) rather than retried, and `mcp-harness hm push` puts them back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcp_harness.store._util import now_ms
from mcp_harness.store.port import Connection, Store

KIND_BLOB = "blob"
"""A signed blob, held in hm_blobs."""
KIND_BLOCK = "block"
"""An IPFS block of a file a document links (raw leaf or dag-pb node), held in the IPFS block store."""


def migrate(conn: Connection) -> None:
    """Create the queue (m019_hm_push)."""
    conn.execute(
        """
        CREATE TABLE hm_push_queue (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            server TEXT NOT NULL,
            cid TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('blob', 'block')),
            rank INTEGER NOT NULL DEFAULT 0,
            grp INTEGER NOT NULL DEFAULT 0,
            enqueued_at INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            due_at INTEGER NOT NULL,
            refused TEXT,
            last_error TEXT,
            UNIQUE (server, cid)
        )
        """
    )
    conn.execute("CREATE INDEX hm_push_due ON hm_push_queue (server, due_at, seq) WHERE refused IS NULL")
    conn.execute("CREATE INDEX hm_push_group ON hm_push_queue (server, grp) WHERE refused IS NULL")


@dataclass(frozen=True, slots=True)
class QueuedBlob:
    seq: int
    server: str
    cid: str
    kind: str
    rank: int
    attempts: int
    group: int


@dataclass(frozen=True, slots=True)
class ServerBacklog:
    """What one server is owed: pending rows, refused rows, the next attempt and the last error."""

    server: str
    pending: int
    refused: int
    due_at: int | None
    attempts: int
    last_error: str | None


class PushQueue:
    """The rows of `hm_push_queue`. Methods block; `enqueue` joins the caller's transaction when there is one."""

    def __init__(self, db: Store) -> None:
        self._db = db

    def enqueue(self, servers: Sequence[str], items: Iterable[tuple[str, str, int]], *, now: int | None = None) -> int:
        """Owe `(cid, kind, rank)` items to each server, as one group (they travel together); an item already owed
        there is left as it is, in its own group. Returns the rows added."""
        at = now_ms() if now is None else now
        listed = list(items)
        if not listed or not servers:
            return 0
        with self._db.transaction() as conn:
            return self._insert(conn, servers, listed, at)

    @staticmethod
    def _insert(conn: Connection, servers: Sequence[str], items: list[tuple[str, str, int]], at: int) -> int:
        # A fresh group number: past the highest seq held (a lookup on the primary key). Every group still holding
        # rows is at most its rows' first seq, so no live group is joined; a reused number's rows are all gone.
        group = int(conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM hm_push_queue").fetchone()[0])
        rows = [(server, cid, kind, rank, group, at, at) for cid, kind, rank in items for server in servers]
        # executemany's rowcount sums the rows each execution inserted (an ignored duplicate adds 0), on both backends.
        return max(
            conn.executemany(
                "INSERT OR IGNORE INTO hm_push_queue (server, cid, kind, rank, grp, enqueued_at, due_at) "
                "VALUES (?,?,?,?,?,?,?)",
                rows,
            ).rowcount,
            0,
        )

    def due(self, server: str, limit: int, *, now: int | None = None, force: bool = False) -> list[QueuedBlob]:
        """The oldest rows owed to `server` whose time has come (all of them with `force`), in enqueue order: those
        of the groups the first `limit` such rows belong to, each group whole (so possibly more than `limit`)."""
        at = now_ms() if now is None else now
        where = "server = ? AND refused IS NULL" + ("" if force else " AND due_at <= ?")
        args: list[object] = [server] if force else [server, at]
        sql = (
            f"SELECT * FROM hm_push_queue WHERE {where} AND grp IN "
            f"(SELECT grp FROM hm_push_queue WHERE {where} ORDER BY seq LIMIT ?) ORDER BY seq"
        )
        with self._db.reading() as conn:
            rows = conn.execute(sql, [*args, *args, limit]).fetchall()
        return [
            QueuedBlob(r["seq"], r["server"], r["cid"], r["kind"], r["rank"], r["attempts"], r["grp"]) for r in rows
        ]

    def delivered(self, server: str, seqs: Sequence[int]) -> None:
        with self._db.transaction() as conn:
            conn.executemany("DELETE FROM hm_push_queue WHERE server = ? AND seq = ?", [(server, s) for s in seqs])

    def failed(self, server: str, seqs: Sequence[int], error: str, due_at: int) -> None:
        """A transient failure: count the attempt, keep the rows, try again at `due_at`."""
        with self._db.transaction() as conn:
            conn.executemany(
                "UPDATE hm_push_queue SET attempts = attempts + 1, due_at = ?, last_error = ? "
                "WHERE server = ? AND seq = ?",
                [(due_at, error, server, s) for s in seqs],
            )

    def refuse(self, server: str, seqs: Sequence[int], reason: str) -> None:
        """The server refused these for good: set them aside (not retried until `retry_refused`)."""
        with self._db.transaction() as conn:
            conn.executemany(
                "UPDATE hm_push_queue SET refused = ?, last_error = ? WHERE server = ? AND seq = ?",
                [(reason, reason, server, s) for s in seqs],
            )

    def retry_refused(self, server: str | None = None) -> int:
        """Put refused rows back in line (`mcp-harness hm push`), due now."""
        sql = "UPDATE hm_push_queue SET refused = NULL, due_at = ? WHERE refused IS NOT NULL"
        args: list[object] = [now_ms()]
        if server is not None:
            sql += " AND server = ?"
            args.append(server)
        with self._db.transaction() as conn:
            return conn.execute(sql, args).rowcount

    def refused_rows(self, server: str) -> list[QueuedBlob]:
        """The rows set aside for `server`, in enqueue order."""
        with self._db.reading() as conn:
            rows = conn.execute(
                "SELECT * FROM hm_push_queue WHERE server = ? AND refused IS NOT NULL ORDER BY seq", (server,)
            ).fetchall()
        return [
            QueuedBlob(r["seq"], r["server"], r["cid"], r["kind"], r["rank"], r["attempts"], r["grp"]) for r in rows
        ]

    def requeue(self, server: str, seqs: Sequence[int], items: Iterable[tuple[str, str, int]]) -> int:
        """Put set-aside rows back as one new group with `items` (what vouches for them), due now, in one
        transaction: the refused rows are replaced, not duplicated. Returns the rows now owed anew."""
        listed = list(items)
        with self._db.transaction() as conn:
            conn.executemany("DELETE FROM hm_push_queue WHERE server = ? AND seq = ?", [(server, s) for s in seqs])
            return self._insert(conn, [server], listed, now_ms()) if listed else 0

    def next_due(self) -> int | None:
        """The soonest due time of any pending row, None when nothing is owed."""
        with self._db.reading() as conn:
            row = conn.execute("SELECT MIN(due_at) FROM hm_push_queue WHERE refused IS NULL").fetchone()
        return None if row[0] is None else int(row[0])

    def backlog(self) -> list[ServerBacklog]:
        """Per server with anything owed: counts, next attempt, attempts so far and the last error."""
        with self._db.reading() as conn:
            rows = conn.execute(
                # Counted with CASE, not SUM(boolean): PostgreSQL has no sum of booleans.
                "SELECT server, SUM(CASE WHEN refused IS NULL THEN 1 ELSE 0 END) AS pending, "
                "SUM(CASE WHEN refused IS NULL THEN 0 ELSE 1 END) AS refused, "
                "MIN(CASE WHEN refused IS NULL THEN due_at END) AS due_at, MAX(attempts) AS attempts, "
                "(SELECT last_error FROM hm_push_queue q WHERE q.server = hm_push_queue.server "
                "AND last_error IS NOT NULL ORDER BY seq DESC LIMIT 1) AS last_error "
                "FROM hm_push_queue GROUP BY server ORDER BY server"
            ).fetchall()
        return [
            ServerBacklog(
                r["server"], int(r["pending"]), int(r["refused"]), r["due_at"], int(r["attempts"]), r["last_error"]
            )
            for r in rows
        ]

    def pending_of(self, cids: Sequence[str]) -> dict[str, int]:
        """Per server, how many of `cids` are still owed to it."""
        if not cids:
            return {}
        marks = ",".join("?" * len(cids))
        with self._db.reading() as conn:
            rows = conn.execute(
                f"SELECT server, COUNT(*) FROM hm_push_queue WHERE cid IN ({marks}) GROUP BY server", list(cids)
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}


__all__ = ["KIND_BLOB", "KIND_BLOCK", "PushQueue", "QueuedBlob", "ServerBacklog", "migrate"]
