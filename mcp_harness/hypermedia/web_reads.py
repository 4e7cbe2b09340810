"""The Seed web API's queries answered from the embedded node, in the shapes the official client's schemas parse.

Each answer is what the Seed web app's handler returns for the same input (`frontend/packages/shared/src/api-*.ts`),
built from the node's own JSON where it has one — a document is `Document.to_json()` (`HMDocument`), a comment
`activity.comment_json` (`HMComment`), an event page `list_events` (ListEvents) — so the API and `read hm://` share
one shape. Inputs are what `web_api.decode_query` gives; a malformed one is refused naming the field and its form.

Plain synchronous code over the store (`server/seed_api.py` calls it on a worker thread).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.hypermedia.activity import comment_json, unpacked
from mcp_harness.hypermedia.cbor import decode
from mcp_harness.hypermedia.cid import CID, DAG_CBOR
from mcp_harness.hypermedia.ids import HmId, parse_hm_id
from mcp_harness.hypermedia.node import Comment, Document, Node
from mcp_harness.store._util import iso_time
from mcp_harness.store.db import Database

QUERY_KEYS = ("Resource", "ResourceMetadata", "Account", "ListChanges", "ListComments", "ListEvents", "Query", "GetCID")
"""The query keys served (`GET /api/<Key>`); the Seed web app has more."""
MAX_COMMENTS = 2000
"""ListComments answers every comment of a document at once (as Seed does); past this many, the oldest are kept."""
MAX_QUERY_RESULTS = 500
_EVENT_PARAMS = {
    "pageSize": "pageSize",
    "pageToken": "pageToken",
    "trustedOnly": "trustedOnly",
    "filterAuthors": "authors",
    "filterEventType": "eventTypes",
    "filterResource": "resource",
    "currentAccount": "currentAccount",
}


class SeedReads:
    """The queries of `QUERY_KEYS` over a node (and its database, for the few lookups the node has no method for)."""

    def __init__(self, node: Node, db: Database) -> None:
        self.node = node
        self._db = db
        self._handlers: dict[str, Callable[[Mapping[str, Any]], Any]] = {
            "Resource": self.resource,
            "ResourceMetadata": self.resource_metadata,
            "Account": self.account,
            "ListChanges": self.list_changes,
            "ListComments": self.list_comments,
            "ListEvents": self.list_events,
            "Query": self.query,
            "GetCID": self.get_cid,
        }

    def answer(self, key: str, params: Mapping[str, Any]) -> Any:
        """The output of query `key` for its decoded input.

        Raises:
            NotFound: `key` is not one of `QUERY_KEYS`.
            BadRequest: the input is malformed.
        """
        handler = self._handlers.get(key)
        if handler is None:
            raise NotFound(f"Unknown query key: {key}. This server answers {', '.join(QUERY_KEYS)}.")
        return handler(params)

    # --- documents ---------------------------------------------------------------------------------------------------

    def resource(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`{type: document|comment|redirect|tombstone|not-found, id, …}` for `id=<hm://…>`."""
        hm = _hm_param(params, "id")
        ident = unpacked(hm.uid, hm.path, hm.version, hm.block_ref)
        path = hm.path_string
        ref = self.node.ref(hm.uid, path)
        if ref is None and len(hm.path) == 1:
            try:
                found = self.node.find_comment(hm.uid, hm.path[0]) if _maybe_tsid(hm.path[0]) else None
            except NotFound:  # the comment was deleted
                return {"type": "tombstone", "id": ident}
            if found is not None:
                return {"type": "comment", "id": ident, "comment": self.comment_json(found)}
        if ref is None:
            return {"type": "not-found", "id": ident}
        if ref.is_redirect:
            target = unpacked(ref.redirect_space or hm.uid, _segments(ref.redirect_path or ""))
            return {"type": "redirect", "id": ident, "redirectTarget": target}
        if ref.is_tombstone:
            return {"type": "tombstone", "id": ident}
        document = self.node.document(hm.uid, path, hm.version)
        return {"type": "document", "id": ident, "document": document.to_json()}

    def resource_metadata(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`{id, metadata}` (metadata null when nothing is published there), as `ResourceMetadata`."""
        hm = _hm_param(params, "id")
        document = self._live(hm.uid, hm.path_string)
        return {"id": unpacked(hm.uid, hm.path, hm.version), "metadata": document.state.metadata if document else None}

    def account(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`{type: "account", id, metadata}` from the account's Profile (else its home document's metadata), or
        `{type: "account-not-found", uid}`."""
        uid = params.get("id")
        if not isinstance(uid, str) or not uid:
            raise BadRequest("Account takes id=<account id>, e.g. id=z6Mk….")
        home = self._live(uid, "")
        metadata = self.account_metadata(uid, home)
        if metadata is None:
            return {"type": "account-not-found", "uid": uid}
        return {"type": "account", "id": unpacked(uid, (), home.version if home else None), "metadata": metadata}

    def account_metadata(self, uid: str, home: Document | None = None) -> dict[str, Any] | None:
        profile = self.node.profile(uid)
        if profile is not None and profile.get("name"):
            metadata: dict[str, Any] = {"name": profile["name"]}
            if profile.get("avatar"):
                metadata["icon"] = profile["avatar"]
            if profile.get("description"):
                metadata["summary"] = profile["description"]
            return metadata
        home = home or self._live(uid, "")
        return dict(home.state.metadata) if home is not None else None

    def list_changes(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Every Change of the document's current version, newest first: `{changes: [{id, author, deps,
        createTime}], latestVersion}` (empty for a redirect, as Seed answers)."""
        hm = _hm_param(params, "targetId")
        ref = self.node.ref(hm.uid, hm.path_string)
        if ref is not None and ref.is_redirect:
            return {"changes": [], "latestVersion": ""}
        document = self.node.document(hm.uid, hm.path_string)
        rows = self._change_rows(document.state.heads)
        rows.sort(key=lambda r: (-r[2], r[0]))
        changes = [{"id": c, "author": a, "deps": list(d), "createTime": iso_time(ts)} for c, a, ts, d in rows]
        return {"changes": changes, "latestVersion": document.version}

    def _change_rows(self, heads: tuple[str, ...] | list[str]) -> list[tuple[str, str, int, tuple[str, ...]]]:
        found: dict[str, tuple[str, str, int, tuple[str, ...]]] = {}
        frontier = list(heads)
        with self._db.reading() as conn:
            while frontier:
                marks = ",".join("?" * len(frontier))
                rows = conn.execute(
                    f"SELECT cid, author, ts, deps FROM hm_changes WHERE cid IN ({marks})", frontier
                ).fetchall()
                level = {
                    r["cid"]: (r["cid"], r["author"], r["ts"], tuple(d for d in r["deps"].split(".") if d))
                    for r in rows
                }
                found.update(level)
                frontier = list(dict.fromkeys(d for row in level.values() for d in row[3] if d not in found))
        return list(found.values())

    # --- comments, events, directories ----------------------------------------------------------------------------

    def list_comments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`{comments: [HMComment], authors: {uid: {id, metadata}}}`: every live comment on the document."""
        hm = _hm_param(params, "targetId")
        space, path = hm.uid, hm.path_string
        comments: list[Comment] = []
        after: tuple[int, str] | None = None
        while len(comments) < MAX_COMMENTS:
            page = self.node.comments_page(space, path, after=after, limit=min(200, MAX_COMMENTS - len(comments)))
            comments += page
            if len(page) < 200:
                break
            after = (page[-1].row.ts, page[-1].row.cid)
        out = [self.comment_json(c) for c in comments]
        authors = {c.row.author: None for c in comments}
        return {
            "comments": out,
            "authors": {uid: {"id": unpacked(uid), "metadata": self.account_metadata(uid)} for uid in authors},
        }

    def comment_json(self, comment: Comment) -> dict[str, Any]:
        """The `HMComment` of a stored comment: its parent and root named by comment id, as Seed names them."""
        row = comment.row
        ids = self._comment_ids([c for c in (row.reply_parent, row.thread_root) if c])
        parent = ids.get(row.reply_parent) if row.reply_parent else None
        root = ids.get(row.thread_root) if row.thread_root else None
        return comment_json(row.cid, row.author, row.tsid, comment.value, reply_parent=parent, thread_root=root)

    def _comment_ids(self, cids: list[str]) -> dict[str, str]:
        if not cids:
            return {}
        with self._db.reading() as conn:
            rows = conn.execute(
                f"SELECT cid, author, tsid FROM hm_comments WHERE cid IN ({','.join('?' * len(cids))})", cids
            ).fetchall()
        return {r["cid"]: f"{r['author']}/{r['tsid']}" for r in rows}

    def list_events(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A ListEvents page. Ours is always in observed order (`order: "observed"`): `claimed` is accepted and
        answered the same way, newest observed first."""
        mapped: dict[str, Any] = {}
        for name, value in params.items():
            if name == "order":
                if value not in ("claimed", "observed"):
                    raise BadRequest(f'ListEvents order must be "claimed" or "observed"; got {value!r}.')
                continue
            if name not in _EVENT_PARAMS:
                raise BadRequest(f"ListEvents takes {', '.join([*_EVENT_PARAMS, 'order'])}; not {name!r}.")
            if name == "pageSize" and value is not None:
                value = _count("ListEvents", name, value)
            if value is not None:
                mapped[_EVENT_PARAMS[name]] = value
        page = self.node.activity.list_events(**mapped)
        return {"events": page["events"], "nextPageToken": page["nextPageToken"]}

    def query(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`Query` in Children mode: the live documents directly below each included path, as `HMDocumentInfo`s
        (`{in, results, mode}`), by path, at most `limit`."""
        includes = params.get("includes")
        if not isinstance(includes, list) or not includes:
            raise BadRequest('Query takes includes=[{"space": "z6Mk…", "path": "/parent", "mode": "Children"}].')
        limit = params.get("limit")
        cap = MAX_QUERY_RESULTS if limit is None else min(_count("Query", "limit", limit), MAX_QUERY_RESULTS)
        results: list[dict[str, Any]] = []
        first: dict[str, Any] | None = None
        for include in includes:
            space, path, mode = _inclusion(include)
            if mode != "Children":
                raise BadRequest(f'Query mode {mode!r} is not served here; only "Children" is.')
            first = first or unpacked(space, _segments(path))
            for child in self.node.children(space, path, limit=cap - len(results)):
                results.append(self._document_info(child))
            if len(results) >= cap:
                break
        assert first is not None
        return {"in": first, "results": results, "mode": "Children"}

    def _document_info(self, document: Document) -> dict[str, Any]:
        state = document.state
        update_ms = state.update_time or document.ref.ts
        updated = iso_time(update_ms)
        return {
            "type": "document",
            "id": unpacked(document.space, _segments(document.path), document.version),
            "path": _segments(document.path),
            "authors": list(state.authors),
            "createTime": iso_time(state.create_time or document.ref.ts),
            "updateTime": updated,
            "sortTime": datetime.fromtimestamp(update_ms / 1000, UTC),
            "genesis": document.ref.genesis or "",
            "version": document.version,
            "breadcrumbs": [],
            "activitySummary": {
                "latestCommentId": "",
                "commentCount": self.node.comment_count(document.space, document.path),
                "latestChangeTime": updated,
                "isUnread": False,
                "childrenCount": self.node.child_count(document.space, document.path),
            },
            "generationInfo": {"genesis": document.ref.genesis or "", "generation": document.ref.generation},
            "metadata": state.metadata,
            "visibility": "Public",
        }

    # --- blobs -------------------------------------------------------------------------------------------------------

    def get_cid(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """`{value}`: a signed blob rendered as DAG-JSON, as the daemon's `/ipfs/<cid>.dagjson`."""
        text = params.get("cid")
        try:
            cid = CID.parse(text) if isinstance(text, str) else None
        except ValueError as exc:
            raise BadRequest(f"GetCID cid {text!r} is not a CID: {exc}.") from None
        if cid is None:
            raise BadRequest("GetCID takes cid=<CID>, e.g. cid=bafyrei….")
        if cid.codec != DAG_CBOR:
            raise BadRequest(f"GetCID renders DAG-CBOR blobs; {cid} is a file block: fetch it at /ipfs/{cid}.")
        data = self.node.store.data(str(cid))
        if data is None:
            raise NotFound(f"This server holds no blob {cid}.")
        return {"value": dag_json(decode(data))}

    def _live(self, space: str, path: str) -> Document | None:
        try:
            return self.node.document(space, path)
        except NotFound:
            return None


def dag_json(value: object) -> Any:
    """A decoded DAG-CBOR value in the DAG-JSON data model: a CID as `{"/": cid}`, bytes as `{"/": {"bytes":
    base64 without padding}}`."""
    if isinstance(value, CID):
        return {"/": str(value)}
    if isinstance(value, bytes):
        return {"/": {"bytes": base64.b64encode(value).decode().rstrip("=")}}
    if isinstance(value, dict):
        return {str(k): dag_json(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [dag_json(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _count(key: str, name: str, value: object) -> int:
    """A count parameter (`Query` limit, `ListEvents` pageSize): a whole, finite, non-negative number. JSON's
    `1e400` parses to infinity and `2.5` is no count; both are refused naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key} {name} must be a non-negative whole number; got {value!r}.")
    if isinstance(value, float) and not value.is_integer():  # also NaN and ±Infinity
        raise BadRequest(f"{key} {name} must be a finite, non-negative whole number; got {value!r}.")
    if value < 0:
        raise BadRequest(f"{key} {name} must be a non-negative whole number; got {value!r}.")
    return int(value)


def _hm_param(params: Mapping[str, Any], name: str) -> HmId:
    """An hm:// id from a parameter: packed text (Resource's `id`, ListChanges' `targetId`) or an unpacked object
    (ListComments' `targetId`)."""
    value = params.get(name)
    if isinstance(value, Mapping):
        text = value.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        version = value.get("version")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(text, str) and isinstance(version, str) and version and "?v=" not in text:
            text += f"?v={version}"
        value = text  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(value, str) or not value:
        raise BadRequest(f"{name} must be an hm:// id, e.g. {name}=hm://z6Mk…/path.")
    return parse_hm_id(value)


def _inclusion(include: object) -> tuple[str, str, str]:
    if not isinstance(include, Mapping):
        raise BadRequest(f"Query includes[] must be objects {{space, path?, mode}}; got {include!r}.")
    space = include.get("space")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    path = include.get("path") or ""  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    mode = include.get("mode")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(space, str) or not space or not isinstance(path, str):
        raise BadRequest(f"Query includes[] need a space (account id) and an optional path; got {include!r}.")
    if path and not path.startswith("/"):
        path = "/" + path
    return space, path.rstrip("/"), str(mode)


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s]


def _maybe_tsid(segment: str) -> bool:
    return segment.startswith("z") and 12 <= len(segment) <= 16


__all__ = ["MAX_COMMENTS", "QUERY_KEYS", "SeedReads", "dag_json"]
