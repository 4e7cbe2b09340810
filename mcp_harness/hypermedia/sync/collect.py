"""Everything a document is made of on this node, for `mcp-harness hm push DOC` to owe a server again.

A document is its Refs (every generation at the path), the Changes their heads reach (back to the genesis), the
capabilities of its space (a writer's Ref needs one to be indexed anywhere), its comments, and the IPFS blocks of
the files its Changes link. A push owes them in that dependency order (`push.rank_of` orders each request).
"""

from __future__ import annotations

from mcp_harness.errors import NotFound
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.node import hm_url
from mcp_harness.hypermedia.sync.push import push_items
from mcp_harness.store.db import Database
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


__all__ = ["document_items"]
