"""Reading the activity feed: ListEvents pages (HYPERMEDIA §4) and the lookups that make an event a LoadedEvent.

A page is newest observed first (Seed's `order: "observed"`, the order the node's own pollers need: an event that
arrives late still comes first), one range of the seq index after the filters: authors, event types, a resource
(canonical, or a prefix ending in `*`), trusted authors only. The page token is the opaque cursor of the last seq
returned (`cursors.py`), so a page costs the page however long the feed is.

What Seed's web API resolves as it serves a page is resolved here too, per page and cached within it: an account's
name (its Profile, else its home document; overridden by `currentAccount`'s Contact for it, as Seed does),
documents' metadata and authors, a comment's parent and reply count. Stored rows never hold these, so a renamed
profile shows under every old event at once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness import cursors
from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import activity, mentions
from mcp_harness.hypermedia.activity import EVENT_TYPES, SEED_KINDS, unpacked
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.ids import tsid, version_string
from mcp_harness.hypermedia.materialized import Snapshot
from mcp_harness.identity.keys import public_key_of
from mcp_harness.store._util import iso_time
from mcp_harness.store.port import Connection

MAX_PAGE = 50
DEFAULT_PAGE = 20
MAX_FILTER_VALUES = 32
PARAMS = ("pageSize", "pageToken", "authors", "eventTypes", "resource", "trustedOnly", "currentAccount")


@dataclass(frozen=True, slots=True)
class FeedQuery:
    page_size: int = DEFAULT_PAGE
    before: int | None = None
    authors: tuple[str, ...] | None = None
    types: tuple[str, ...] | None = None
    kinds: tuple[str, ...] = ()
    resource: str | None = None
    prefix: bool = False
    trusted_only: bool = False
    current_account: str | None = None


def _bad(name: str, expected: str, got: object) -> BadRequest:
    return BadRequest(f"activity: {name} must be {expected}; got {json.dumps(got, default=str)}.")


def _account(name: str, value: object) -> str:
    try:
        if not isinstance(value, str):
            raise BadRequest("not a string")
        public_key_of(value)
    except BadRequest:
        raise _bad(name, "an account id (z6Mk…)", value) from None
    return value


def _strings(name: str, value: object, expected: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_FILTER_VALUES:  # pyright: ignore[reportUnknownArgumentType]
        raise _bad(name, f"a list of at most {MAX_FILTER_VALUES} {expected}", value)
    return value  # pyright: ignore[reportUnknownVariableType]


def feed_query(params: Mapping[str, Any]) -> FeedQuery:
    """The ListEvents parameters, checked: each malformed one refused by name, with what it accepts.

    `pageSize` (a number, clamped to 1–50, default 20), `pageToken` (a `nextPageToken`), `authors` (account ids),
    `eventTypes` (comment, doc-update, capability, contact, citation, or the daemon's Ref, Comment, doc/Link, …),
    `resource` (an hm:// id; ending in `*`, a prefix), `trustedOnly` (boolean), `currentAccount` (an account id).
    """
    unknown = [k for k in params if k not in PARAMS]
    if unknown:
        raise BadRequest(f"activity: unknown parameter {unknown[0]!r}; expected {', '.join(PARAMS)}.")
    size = params.get("pageSize", DEFAULT_PAGE)
    if isinstance(size, bool) or not isinstance(size, int | float) or size != size:
        raise _bad("pageSize", "a number (it is clamped to 1–50)", size)
    before = None
    if params.get("pageToken") not in (None, ""):
        position = cursors.decode(params["pageToken"])
        if position is None or not position.isdigit():
            raise _bad("pageToken", "the nextPageToken of an earlier page of this feed", params["pageToken"])
        before = int(position)
    authors = None
    if params.get("authors") is not None:
        # An empty list filters nothing, as on Seed.
        authors = tuple(_account("authors[]", a) for a in _strings("authors", params["authors"], "account ids")) or None
    types: tuple[str, ...] | None = None
    kinds: list[str] = []
    if params.get("eventTypes"):
        chosen: list[str] = []
        for raw in _strings("eventTypes", params["eventTypes"], "event types"):
            key = raw.strip().lower() if isinstance(raw, str) else raw
            if key in EVENT_TYPES:
                chosen.append(key)
            elif isinstance(key, str) and key in SEED_KINDS:
                mapped = SEED_KINDS[key]
                if mapped in ("comment", "doc-update", "capability", "contact"):
                    chosen.append(mapped)
                elif mapped == "citation":
                    kinds.append(key)
            else:
                raise _bad(
                    "eventTypes[]",
                    f"one of {', '.join(EVENT_TYPES)} (or the daemon's Ref, Comment, Capability, Contact, "
                    "doc/Link, doc/Embed, doc/Button, comment/Link, comment/Embed)",
                    raw,
                )
        types = tuple(dict.fromkeys(chosen))
    resource, prefix = None, False
    if params.get("resource") not in (None, ""):
        resource, prefix = _resource(params["resource"])
    trusted = params.get("trustedOnly", False)
    if not isinstance(trusted, bool):
        raise _bad("trustedOnly", "a boolean", trusted)
    current = params.get("currentAccount")
    current = None if current is None else _account("currentAccount", current)
    if trusted and current is None:
        raise BadRequest(
            "activity: trustedOnly needs currentAccount, whose contacts (and itself) are the trusted authors; "
            "pass currentAccount, or give the agent a signing identity."
        )
    page_size = int(max(1, min(MAX_PAGE, size)))  # clamped first: int() of an infinity would raise
    return FeedQuery(page_size, before, authors, types, tuple(kinds), resource, prefix, trusted, current)


def _resource(value: object) -> tuple[str, bool]:
    if not isinstance(value, str):
        raise _bad("resource", "an hm:// id (ending in * for a prefix)", value)
    prefix = value.endswith("*")
    base = value[:-1] if prefix else value
    try:
        found = mentions.canonical(base.rstrip("/") if base.rstrip("/") != "hm:/" else base)
    except BadRequest as error:
        raise BadRequest(f"activity: resource {value!r} is not an hm:// id: {error.message}") from None
    return found + ("/" if prefix and base.endswith("/") else ""), prefix


def _where(conn: Connection, q: FeedQuery) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    authors = set(q.authors) if q.authors is not None else None
    if q.trusted_only:
        assert q.current_account is not None
        trusted = {q.current_account, *contacts_of(conn, q.current_account)}
        authors = trusted if authors is None else authors & trusted
    if authors is not None:
        clauses.append(f"author IN ({','.join('?' * len(authors))})" if authors else "1 = 0")
        args.extend(sorted(authors))
    if q.types is not None:
        either = []
        if q.types:
            either.append(f"type IN ({','.join('?' * len(q.types))})")
            args.extend(q.types)
        if q.kinds:
            either.append(f"lower(kind) IN ({','.join('?' * len(q.kinds))})")
            args.extend(q.kinds)
        clauses.append("(" + " OR ".join(either) + ")" if either else "1 = 0")
    if q.resource is not None:
        if q.prefix:
            clauses.append("about >= ? AND about < ?")
            args.extend([q.resource, q.resource + "\U0010ffff"])
        else:
            clauses.append("about = ?")
            args.append(q.resource)
    return " AND ".join(clauses) or "1 = 1", args  # comparisons, not bare 0/1: PostgreSQL wants booleans


def list_events(conn: Connection, **params: Any) -> dict[str, Any]:
    """One ListEvents page: `{events, nextPageToken ("" on the last page), totalEvents}` (`feed_query` params)."""
    q = feed_query(params)
    where, args = _where(conn, q)
    total = int(conn.execute(f"SELECT COUNT(*) FROM hm_activity WHERE {where}", args).fetchone()[0])
    page_where = where + (" AND seq < ?" if q.before is not None else "")
    page_args = [*args, *([q.before] if q.before is not None else []), q.page_size + 1]
    rows = conn.execute(f"SELECT * FROM hm_activity WHERE {page_where} ORDER BY seq DESC LIMIT ?", page_args).fetchall()
    more = len(rows) > q.page_size
    rows = rows[: q.page_size]
    token = cursors.encode(str(rows[-1]["seq"])) if more else ""
    return {"events": resolve(conn, rows, q.current_account), "nextPageToken": token, "totalEvents": total}


# --- resolving ------------------------------------------------------------------------------------------------------


def contacts_of(conn: Connection, account: str) -> dict[str, str]:
    """The accounts `account` holds as contacts, with the names it gave them (edits by TSID; a tombstone drops)."""
    latest: dict[str, tuple[str | None, str]] = {}
    rows = conn.execute(
        "SELECT data FROM hm_blobs WHERE type = 'Contact' AND author = ? ORDER BY ts, cid", (account,)
    ).fetchall()
    for (data,) in rows:
        value = decode(bytes(data))
        if not isinstance(value, dict):
            continue
        key = str(value.get("id") or tsid(int(value.get("ts") or 0), bytes(data)))  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType]
        latest[key] = (activity.account_of(value.get("subject")), str(value.get("name") or ""))  # pyright: ignore[reportUnknownMemberType]
    return {subject: name for subject, name in latest.values() if subject}


class _Lookups:
    """The page's lookups, each made once."""

    def __init__(self, conn: Connection, current_account: str | None) -> None:
        self.conn = conn
        self.contacts = contacts_of(conn, current_account) if current_account else {}
        self._accounts: dict[str, dict[str, Any]] = {}
        self._docs: dict[tuple[str, str], Snapshot | None] = {}

    def document(self, space: str, path: str) -> Snapshot | None:
        key = (space, path)
        if key not in self._docs:
            row = self.conn.execute(
                "SELECT state FROM hm_documents WHERE space = ? AND path = ? AND live = 1", key
            ).fetchone()
            self._docs[key] = Snapshot.from_bytes(bytes(row[0])) if row is not None and row[0] is not None else None
        return self._docs[key]

    def metadata(self, item: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The metadata of the document an unpacked id names (an account's home document for an account)."""
        if not item:
            return None
        found = self.document(item["uid"], "".join(f"/{s}" for s in item["path"] or () if not s.startswith(":")))
        return dict(found.blocks.metadata) if found is not None else None

    def account(self, uid: str) -> dict[str, Any]:
        """An `HMContactItem`: the account's profile name (or its home document's metadata), as the current
        account's contact calls it when it holds one."""
        if uid not in self._accounts:
            item: dict[str, Any] = {"id": unpacked(uid)}
            row = self.conn.execute(
                "SELECT data FROM hm_blobs WHERE type = 'Profile' AND author = ? ORDER BY ts DESC, cid DESC LIMIT 1",
                (uid,),
            ).fetchone()
            profile = decode(bytes(row[0])) if row is not None else None
            metadata: dict[str, Any] | None = None
            if isinstance(profile, dict) and profile.get("name"):
                metadata = {"name": str(profile["name"])}  # pyright: ignore[reportUnknownArgumentType]
                if profile.get("avatar"):
                    metadata["icon"] = str(profile["avatar"])  # pyright: ignore[reportUnknownArgumentType]
            else:
                metadata = self.metadata(item["id"])
            if uid in self.contacts:
                metadata = {**(metadata or {}), "name": self.contacts[uid]}
            if metadata is not None:
                item["metadata"] = metadata
            self._accounts[uid] = item
        return self._accounts[uid]

    def reply_count(self, comment: Mapping[str, Any]) -> int:
        author, _, comment_tsid = str(comment["id"]).partition("/")
        row = self.conn.execute(
            "SELECT COUNT(DISTINCT r.author || '/' || r.tsid) FROM hm_comments r WHERE r.space = ? AND r.path = ? "
            "AND r.deleted = 0 AND r.reply_parent IN (SELECT cid FROM hm_comments WHERE author = ? AND tsid = ?)",
            (comment["targetAccount"], comment["targetPath"], author, comment_tsid),
        ).fetchone()
        return int(row[0])

    def comment(self, comment_id: str) -> dict[str, Any] | None:
        """The latest version of a comment, as an HMComment."""
        author, _, comment_tsid = comment_id.partition("/")
        row = self.conn.execute(
            "SELECT c.cid, b.data FROM hm_comments c JOIN hm_blobs b ON b.cid = c.cid "
            "WHERE c.author = ? AND c.tsid = ? ORDER BY c.ts DESC LIMIT 1",
            (author, comment_tsid),
        ).fetchone()
        if row is None:
            return None
        value = decode(bytes(row[1]))
        if not isinstance(value, dict):
            return None
        return activity.comment_json(row[0], author, comment_tsid, value)  # pyright: ignore[reportUnknownArgumentType]


def resolve(conn: Connection, rows: Sequence[Any], current_account: str | None) -> list[dict[str, Any]]:
    """The LoadedEvents of a page of rows: stored data with names, metadata and counts looked up now."""
    look = _Lookups(conn, current_account)
    return [_resolve(look, row) for row in rows]


def _resolve(look: _Lookups, row: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(row["data"])
    data["author"] = look.account(row["author"])
    kind = row["type"]
    if kind == "comment":
        comment = data["comment"]
        _set_metadata(data["target"], look.metadata(data["target"]["id"]))
        data["targetAuthorUids"] = _authors(look, data["target"]["id"])
        parent = look.comment(comment["replyParent"]) if comment.get("replyParent") else None
        data["replyingComment"] = parent
        data["replyParentAuthor"] = look.account(parent["author"]) if parent else None
        data["replyCount"] = look.reply_count(comment)
    elif kind == "doc-update":
        doc_id = data["docId"]
        found = look.document(doc_id["uid"], "".join(f"/{s}" for s in doc_id["path"]))
        doc_id["latest"] = found is not None and version_string(found.heads) == doc_id["version"]
        data["document"] = _document(doc_id, found)
    elif kind == "capability":
        data["delegates"] = [look.account(d["id"]["uid"]) for d in data["delegates"]]
        data["target"]["metadata"] = look.metadata(data["capabilityId"])
    elif kind == "contact":
        data["contact"]["subject"] = look.account(data["contact"]["subject"]["id"]["uid"])
    elif kind == "citation":
        _set_metadata(data["source"], look.metadata(data["source"]["id"]))
        _set_metadata(data["target"], look.metadata(data["target"]["id"]))
        data["targetAuthorUids"] = _authors(look, data["target"]["id"])
        if data.get("comment"):
            data["replyCount"] = look.reply_count(data["comment"])
    data["feedEventId"] = row["key"]
    data["eventAtMs"] = max(row["event_at"], row["observed_at"])
    return data


def _set_metadata(item: dict[str, Any], metadata: dict[str, Any] | None) -> None:
    # An HMContactItem's metadata is optional, not nullable: left out when nothing is known.
    if metadata is not None:
        item["metadata"] = metadata


def _authors(look: _Lookups, item: Mapping[str, Any]) -> list[str] | None:
    found = look.document(item["uid"], "".join(f"/{s}" for s in item["path"] or () if not s.startswith(":")))
    return list(found.authors) if found is not None and found.authors else None


def _document(doc_id: Mapping[str, Any], found: Snapshot | None) -> dict[str, Any]:
    """The updated document as an HMDocument without its content (read `docId` for that: a page of 50 whole
    documents would be megabytes), its metadata as it is now."""
    out: dict[str, Any] = {
        "type": "document",
        "id": doc_id["id"],
        "account": doc_id["uid"],
        "path": "".join(f"/{s}" for s in doc_id["path"]),
        "version": doc_id["version"],
        "visibility": "Public",
    }
    if found is not None:
        out["metadata"] = dict(found.blocks.metadata)
        out["authors"] = list(found.authors)
        out["createTime"] = iso_time(found.create_time)
        out["updateTime"] = iso_time(found.update_time)
    return out
