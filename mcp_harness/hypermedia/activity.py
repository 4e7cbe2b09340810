"""The activity feed's events (HYPERMEDIA §4 ListEvents): what a stored blob means to someone following a space.

A blob yields its events here, from its decoded value alone: a Comment its `comment` event, a Ref that names a
version its `doc-update`, a WRITER Capability its `capability`, a Contact with a subject its `contact`; and every
`hm://` link in the blocks of a Comment body or of a Change's `ReplaceBlock` ops a `citation` of what it links to,
found structurally (`mentions.py`: a comment saying "@alice" mentions nobody).

The event `data` is the resolved `LoadedEvent` of Seed's web API (`shared/src/models/activity-service.ts`), minus
what is looked up when a page is read (names, document metadata, reply counts: `store/hm_activity_view.py`), so the
stored row stays true when a profile changes. Keys are Seed's `feedEventId`: `blob-<cid>`, and
`mention-<cid>-<mentionType>-<target>` with the mention type empty, as the daemon leaves it — so HARNESS §10's
collapse of `mention-<cid>--…` onto `blob-<cid>` makes a comment and its @mention fire a trigger once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.hypermedia.blocks import BlockNode, block_from_op, tree_to_json
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.ids import version_string
from mcp_harness.hypermedia.mentions import Link, links_in, mentioned_account, mentions_of
from mcp_harness.identity.keys import ED25519_PREFIX, account_id
from mcp_harness.store._util import iso_time

EVENT_TYPES = ("comment", "doc-update", "capability", "contact", "citation")
SEED_KINDS: dict[str, str | None] = {
    "ref": "doc-update",
    "comment": "comment",
    "capability": "capability",
    "contact": "contact",
    **dict.fromkeys(("comment/embed", "comment/link", "doc/embed", "doc/link", "doc/button"), "citation"),
    "comment/target": None,
    "profile": None,
    "dagpb": None,
}
"""The daemon's `filterEventType` values (case-insensitive) and the event type each selects (None: accepted, as
the daemon does, but yields nothing: Seed's feed resolves no Profile or DagPB events, and a comment's link to the
document it is on is its `comment` event, not a citation)."""


@dataclass(frozen=True, slots=True)
class ActivityEvent:
    """One recorded event (docs/notes interfaces: the trigger monitor resumes from `seq`)."""

    seq: int
    key: str
    """Seed's feedEventId: `blob-<cid>`, or `mention-<cid>--<target>` for a citation."""
    type: str
    """comment | doc-update | capability | contact | citation"""
    cid: str
    author: str
    resource: str
    """Canonical `hm://uid/path` the event is about: the commented or updated document, the capability's scope,
    the contact's subject; for a citation, the document the link is in (a comment's: the one commented on)."""
    target: str | None
    """A citation's cited id (`hm://<account>` for an @mention); a comment's document."""
    mentions: tuple[str, ...]
    """Accounts @-mentioned structurally in the blob (links to `hm://<account>` or its `:profile`)."""
    observed_at: int
    event_at: int
    summary: str
    data: dict[str, Any]
    """The ListEvents event (HYPERMEDIA §4)."""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event extracted from a blob, before the store numbers it."""

    key: str
    type: str
    kind: str
    """Seed's own type name, for `filterEventType`: Comment, Ref, Capability, Contact, doc/Link, comment/Embed, …"""
    cid: str
    author: str
    resource: str
    target: str | None
    mentions: tuple[str, ...]
    event_at: int
    summary: str
    data: dict[str, Any]

    @property
    def about(self) -> str:
        """What a `resource` filter matches, as the daemon: a citation by what it cites, the rest by resource."""
        return (self.target or self.resource) if self.type == "citation" else self.resource


def unpacked(
    uid: str, path: Sequence[str] = (), version: str | None = None, block_ref: str | None = None
) -> dict[str, Any]:
    """An `UnpackedHypermediaId` as the client's `hmId()` builds it."""
    out: dict[str, Any] = {
        "id": "hm://" + uid + "".join(f"/{s}" for s in path if s),
        "uid": uid,
        "path": [s for s in path if s],
        "version": version,
        "blockRef": block_ref,
        "blockRange": None,
        "hostname": None,
        "scheme": None,
    }
    return out


def contact_item(uid: str) -> dict[str, Any]:
    """An `HMContactItem` before its metadata is looked up."""
    return {"id": unpacked(uid)}


def account_of(value: object) -> str | None:
    """The account id an Ed25519 principal (`0xed 0x01 ‖ key`) names; None for anything else."""
    if isinstance(value, bytes) and len(value) == len(ED25519_PREFIX) + 32 and value.startswith(ED25519_PREFIX):
        return account_id(value[len(ED25519_PREFIX) :])
    return None


def _hm_url(space: str, path: str) -> str:
    return f"hm://{space}{path}"


def _path_segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s]


def citations(
    source: str,
    kind_prefix: str,
    cid: str,
    author: str,
    ts: int,
    links: Sequence[Link],
    comment: dict[str, Any] | None = None,
) -> list[NewEvent]:
    """One citation per distinct target a blob links to (the daemon's mention grouping)."""
    out: dict[str, NewEvent] = {}
    space, _, path = source.removeprefix("hm://").partition("/")
    for link in links:
        target = "hm://" + link.target.uid + "".join(f"/{s}" for s in link.target.path if not s.startswith(":"))
        if target in out:
            continue
        kind = f"{kind_prefix}/{link.kind}"
        citation_type = "c" if kind_prefix == "comment" else "d"
        data: dict[str, Any] = {
            "id": f"{cid}-{link.target.block_ref}" if link.target.block_ref else cid,
            "type": "citation",
            "citationType": citation_type,
            "author": contact_item(author),
            "time": iso_time(ts),
            # A document's citation is of the version the Change made, at its block; a comment's, of the document.
            "source": {
                "id": unpacked(space, _path_segments(path), *((None, None) if comment else (cid, link.block or None)))
            },
            "target": {"id": unpacked(link.target.uid, link.target.path, link.target.version, link.target.block_ref)},
            "sourceType": kind,
        }
        if link.target.block_ref:
            data["targetFragment"] = link.target.block_ref
        if comment is not None:
            data["comment"] = comment
        mention = mentioned_account(target)
        out[target] = NewEvent(
            key=f"mention-{cid}--{target}",
            type="citation",
            kind=kind,
            cid=cid,
            author=author,
            resource=source,
            target=target,
            mentions=(mention,) if mention else (),
            event_at=ts,
            summary=f"{'mention' if mention else 'citation'} by {author} of {target} in {source}",
            data=data,
        )
    return list(out.values())


# --- blob events ----------------------------------------------------------------------------------------------------


def comment_json(
    cid: str,
    author: str,
    comment_tsid: str,
    value: Mapping[str, Any],
    *,
    reply_parent: str | None = None,
    thread_root: str | None = None,
) -> dict[str, Any]:
    """An `HMComment`: `reply_parent`/`thread_root` are the comment ids (`author/tsid`) of the blobs named."""
    space = account_of(value.get("space")) or author
    body = value.get("body")
    blocks = [b for b in body if isinstance(b, Mapping)] if isinstance(body, list) else []  # pyright: ignore[reportUnknownVariableType]
    versions = value.get("version")
    out: dict[str, Any] = {
        "id": f"{author}/{comment_tsid}",
        "version": cid,
        "author": author,
        "targetAccount": space,
        "targetPath": str(value.get("path") or ""),
        "targetVersion": version_string(v for v in versions if isinstance(v, CID))
        if isinstance(versions, list)
        else "",  # pyright: ignore[reportUnknownVariableType]
        "content": tree_to_json(_tree(blocks)),  # pyright: ignore[reportUnknownArgumentType]
        "createTime": iso_time(int(value.get("ts") or 0)),
        "updateTime": iso_time(int(value.get("ts") or 0)),
        "visibility": "Public",
    }
    if reply_parent:
        out["replyParent"] = reply_parent
        out["replyParentVersion"] = str(value.get("replyParent") or value.get("threadRoot") or "")
    if thread_root:
        out["threadRoot"] = thread_root
        out["threadRootVersion"] = str(value.get("threadRoot") or "")
    return out


def _tree(blocks: Sequence[Mapping[str, Any]]) -> tuple[BlockNode, ...]:
    nodes: list[BlockNode] = []
    for item in blocks:
        children = item.get("children")
        kids = [c for c in children if isinstance(c, Mapping)] if isinstance(children, list) else []  # pyright: ignore[reportUnknownVariableType]
        nodes.append(BlockNode(block_from_op({k: v for k, v in item.items() if k != "children"}), _tree(kids)))  # pyright: ignore[reportUnknownArgumentType]
    return tuple(nodes)


def comment_events(cid: str, author: str, ts: int, comment: dict[str, Any], value: Mapping[str, Any]) -> list[NewEvent]:
    """A live comment's `comment` event and its citations (a deleted comment, `body: []`, is none)."""
    body = value.get("body")
    if not isinstance(body, list) or not body:
        return []
    blocks = [b for b in body if isinstance(b, Mapping)]  # pyright: ignore[reportUnknownVariableType]
    links = list(links_in(blocks))  # pyright: ignore[reportUnknownArgumentType]
    document = _hm_url(comment["targetAccount"], comment["targetPath"])
    comment_id = comment["id"]
    data: dict[str, Any] = {
        "id": cid,
        "type": "comment",
        "author": contact_item(author),
        "time": iso_time(ts),
        "comment": comment,
        "commentId": unpacked(author, comment_id.split("/")[1:]),
        "target": {
            "id": unpacked(
                comment["targetAccount"], _path_segments(comment["targetPath"]), comment["targetVersion"] or None
            )
        },
    }
    own = NewEvent(
        key=f"blob-{cid}",
        type="comment",
        kind="Comment",
        cid=cid,
        author=author,
        resource=document,
        target=document,
        mentions=mentions_of(links),
        event_at=ts,
        summary=f"comment by {author} on {document}",
        data=data,
    )
    return [own, *citations(document, "comment", cid, author, ts, links, comment)]


def ref_event(cid: str, author: str, ts: int, space: str, path: str, heads: Sequence[str]) -> NewEvent | None:
    """The `doc-update` of a Ref naming a version (a tombstone or a redirect updates no document)."""
    if not heads:
        return None
    document = _hm_url(space, path)
    version = version_string(heads)
    data = {
        "id": cid,
        "type": "doc-update",
        "author": contact_item(author),
        "time": iso_time(ts),
        "docId": unpacked(space, _path_segments(path), version),
    }
    summary = f"update by {author} of {document}"
    return NewEvent(f"blob-{cid}", "doc-update", "Ref", cid, author, document, None, (), ts, summary, data)


def capability_event(cid: str, author: str, ts: int, value: Mapping[str, Any]) -> NewEvent | None:
    """A WRITER capability's event (Seed's feed shows no AGENT grants)."""
    delegate = account_of(value.get("delegate"))
    role = str(value.get("role") or "")
    if delegate is None or role != "WRITER":
        return None
    path = str(value.get("path") or "")
    resource = _hm_url(author, path)
    grant = unpacked(author, _path_segments(path))
    capability: dict[str, Any] = {
        "role": "writer",
        "id": cid,
        "createTime": iso_time(ts),
        "accountUid": author,
        "grantId": grant,
        "capabilityId": cid,
    }
    if value.get("label"):
        capability["label"] = str(value["label"])
    data = {
        "id": cid,
        "type": "capability",
        "author": contact_item(author),
        "time": iso_time(ts),
        "delegates": [contact_item(delegate)],
        "capabilityId": grant,
        "capability": capability,
        "target": {"id": None, "metadata": None},
        "targetId": None,
        "targetMetadata": None,
    }
    summary = f"{author} made {delegate} a writer of {resource}"
    return NewEvent(f"blob-{cid}", "capability", "Capability", cid, author, resource, None, (), ts, summary, data)


def contact_event(cid: str, author: str, ts: int, contact_tsid: str, value: Mapping[str, Any]) -> NewEvent | None:
    """A Contact's event (a tombstone, with no subject, is none — as Seed skips it)."""
    subject = account_of(value.get("subject"))
    if subject is None:
        return None
    authority = account_of(value.get("account")) or author
    contact: dict[str, Any] = {
        "id": unpacked(authority, [str(value.get("id") or contact_tsid)]),
        "name": str(value.get("name") or ""),
        "subject": contact_item(subject),
    }
    subscribe = value.get("subscribe")
    if isinstance(subscribe, Mapping) and subscribe:
        contact["subscribe"] = {str(k): bool(v) for k, v in subscribe.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    data = {"id": cid, "type": "contact", "author": contact_item(author), "time": iso_time(ts), "contact": contact}
    summary = f"{author} added {subject} as a contact"
    return NewEvent(f"blob-{cid}", "contact", "Contact", cid, author, f"hm://{subject}", None, (), ts, summary, data)
