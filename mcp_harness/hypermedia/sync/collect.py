"""Everything a document is made of on this node, for `mcp-harness hm push DOC` to owe a server again.

A document is its Refs (every generation at the path), the Changes their heads reach (back to the genesis), the
capabilities of its space (a writer's Ref needs one to be indexed anywhere), its comments, and the IPFS blocks of
the files its Changes link. A push owes them in that dependency order (`push.rank_of` orders each request).

`retry_refused` is `hm push`'s way back for blobs a server set aside: a Change or Ref goes back together with the
whole document it belongs to, as one group, since what vouches for it on the receiver (the writer's Ref beside a
Change, the Changes a Ref points at) may have been delivered or refused apart from it.
"""

from __future__ import annotations

from mcp_harness.errors import NotFound
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.node import hm_url
from mcp_harness.hypermedia.sync.push import push_items
from mcp_harness.store.db import Database
from mcp_harness.store.hm_push import KIND_BLOB, PushQueue
from mcp_harness.store.ipfs_blocks import IpfsBlockStore


def document_items(db: Database, space: str, path: str) -> list[tuple[str, str, int]]:
    """Queue rows `(cid, kind, rank)` for the whole document. Raises NotFound when nothing is held at the path."""
    with db.reading() as conn:
        refs = conn.execute("SELECT cid, heads FROM hm_refs WHERE space = ? AND path = ?", (space, path)).fetchall()
        if not refs:
            raise NotFound(f"No document at {hm_url(space, path)} on this node: nothing to push.")
        cids: dict[str, None] = {}
        frontier = [h for r in refs for h in r["heads"].split(".") if h]
        while frontier:
            marks = ",".join("?" * len(frontier))
            rows = conn.execute(
                f"SELECT cid, genesis, deps FROM hm_changes WHERE cid IN ({marks})", frontier
            ).fetchall()
            following: list[str] = []
            for row in rows:
                if row["cid"] in cids:
                    continue
                cids[row["cid"]] = None
                following += [d for d in (row["deps"] or "").split(".") if d]
                if row["genesis"]:
                    following.append(row["genesis"])
            frontier = [c for c in dict.fromkeys(following) if c not in cids]
        cids = dict.fromkeys(reversed(cids))  # found from the heads back: send the genesis end first
        cids.update((r["cid"], None) for r in refs)
        for table, where in (("hm_capabilities", "space = ?"), ("hm_comments", "space = ? AND path = ?")):
            args = (space,) if table == "hm_capabilities" else (space, path)
            cids.update((r["cid"], None) for r in conn.execute(f"SELECT cid FROM {table} WHERE {where}", args))
        listed = list(cids)
        blobs: list[Blob] = []
        for start in range(0, len(listed), 500):
            chunk = listed[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in conn.execute(f"SELECT cid, data FROM hm_blobs WHERE cid IN ({marks})", chunk):
                data = bytes(row["data"])
                value = decode(data)
                if isinstance(value, dict):
                    blobs.append(Blob(cid=CID.parse(row["cid"]), data=data, value=value))
    order = {cid: i for i, cid in enumerate(listed)}
    blobs.sort(key=lambda b: order[str(b.cid)])
    return push_items(blobs, IpfsBlockStore(db))


def retry_refused(db: Database, server: str) -> int:
    """Put the rows set aside for `server` back in line, due now, each Change or Ref with its whole document in
    one group. Returns how many set-aside rows went back."""
    queue = PushQueue(db)
    rows = queue.refused_rows(server)
    if not rows:
        return 0
    items: dict[str, tuple[str, str, int]] = {r.cid: (r.cid, r.kind, r.rank) for r in rows}
    for space, path in _documents_of(db, [r.cid for r in rows if r.kind == KIND_BLOB]):
        try:
            vouchers = document_items(db, space, path)
        except NotFound:
            continue
        for item in vouchers:
            items.setdefault(item[0], item)
    queue.requeue(server, [r.seq for r in rows], list(items.values()))
    return len(rows)


def _documents_of(db: Database, cids: list[str]) -> list[tuple[str, str]]:
    """The (space, path) of every document held here that the Changes or Refs among `cids` belong to."""
    if not cids:
        return []
    marks = ",".join("?" * len(cids))
    with db.reading() as conn:
        geneses = {
            r["genesis"] or r["cid"]
            for r in conn.execute(f"SELECT cid, genesis FROM hm_changes WHERE cid IN ({marks})", cids)
        }
        found = {
            (r["space"], r["path"])
            for r in conn.execute(f"SELECT space, path FROM hm_refs WHERE cid IN ({marks})", cids)
        }
        if geneses:
            listed = list(geneses)
            rows = conn.execute(
                f"SELECT DISTINCT space, path FROM hm_refs WHERE genesis IN ({','.join('?' * len(listed))})", listed
            )
            found.update((r["space"], r["path"]) for r in rows)
    return sorted(found)


__all__ = ["document_items", "retry_refused"]
