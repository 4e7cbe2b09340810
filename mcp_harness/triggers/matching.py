"""Does this activity event fire this trigger? The pure matchers of the comment, mention and site-update sources
(HARNESS §10, the reference's `activity-triggers.ts`), and the keys a firing is recorded under.

Matching is structural, never a substring scan of the event:
- `document-comment`: a `comment` event on the resource or a document below it (`hm://a/doc` covers `hm://a/doc`
  and `hm://a/doc/sub`, not `hm://a/docs`), by the `author` account if one is given (an account id, compared
  exactly: a profile name can be claimed by anyone);
- `user-mention`: an event whose structural mentions (`ActivityEvent.mentions`: links to `hm://<account>` or its
  `:profile` in blocks) name one of the accounts — a comment saying "@alice" mentions nobody; `resourcePrefix`
  limits it to mentions made in documents (or their comments) at or below that resource;
- `site-update`: any event about a resource at or below the prefix (a citation by what it cites, as the feed's own
  `resource` filter), of the given `eventTypes` if any, with the reference's legacy aliases (`Ref`, `Change` and
  `document-update` mean `doc-update`; Seed's own blob type names — `Comment`, `Capability`, `Contact`, a
  citation's `comment/Embed` and the like — match their events), case-insensitively.

A comment that @-mentions an account yields two events, the comment and its citation twin; `firing_key` collapses
`mention-<cid>--…` onto `blob-<cid>`, so a trigger both match fires once.
"""

from __future__ import annotations

from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.activity import ActivityEvent
from mcp_harness.hypermedia.ids import parse_hm_id
from mcp_harness.store.triggers import WATCHED_SOURCES

ACTIVITY_SOURCES = WATCHED_SOURCES
"""The source types the activity monitor evaluates."""
BLOB_TYPES = {"comment": "Comment", "doc-update": "Ref", "capability": "Capability", "contact": "Contact"}
"""Seed's blob type name of each event type (a citation's is its `sourceType`, e.g. `comment/Embed`)."""
ALIASES: dict[str, tuple[str, ...]] = {
    "change": ("doc-update", "document-update", "ref"),
    "ref": ("doc-update", "document-update", "change"),
    "doc-update": ("change", "ref", "document-update"),
    "document-update": ("change", "ref", "doc-update"),
}
"""The reference's `activityTypeMatches` aliases, keyed by the configured type (lowercase)."""


def firing_key(event_key: str) -> str:
    """The dedupe key of a firing for an event: its feed key, a citation's collapsed onto `blob-<cid>`."""
    if event_key.startswith("mention-"):
        rest = event_key.removeprefix("mention-")
        cid, separator, _ = rest.partition("--")
        if separator and cid:
            return f"blob-{cid}"
    return event_key


def canonical(resource: str) -> str:
    """`hm://<account>/<path>` without version or fragment (text that is no hm:// id only loses `?…` and `#…`)."""
    try:
        return parse_hm_id(resource).id
    except BadRequest:
        return resource.split("#", 1)[0].split("?", 1)[0].rstrip("/")


def under(resource: str | None, prefix: str) -> bool:
    """Whether `resource` is `prefix` or a document below it (both compared canonical)."""
    if not resource:
        return False
    have, want = canonical(resource), canonical(prefix)
    return have == want or have.startswith(want.rstrip("/") + "/")


def _account(value: str) -> str:
    text = value.strip()
    if text.startswith("hm://"):
        try:
            return parse_hm_id(text).uid
        except BadRequest:
            return text
    return text


def matches_document_comment(source: dict[str, Any], event: ActivityEvent) -> bool:
    if event.type != "comment" or not under(event.resource, source["resource"]):
        return False
    author = source.get("author")
    return author is None or _account(str(author)) == event.author


def matches_user_mention(source: dict[str, Any], event: ActivityEvent) -> bool:
    if not set(event.mentions) & set(source["mentionedAccounts"]):
        return False
    prefix = source.get("resourcePrefix")
    return prefix is None or under(event.resource, prefix)


def about(event: ActivityEvent) -> str:
    """What a site-update prefix is matched against: a citation by what it cites, any other event by its resource."""
    return (event.target or event.resource) if event.type == "citation" else event.resource


def event_types(event: ActivityEvent) -> list[str]:
    """The names an event answers to in `eventTypes`: its type and Seed's blob type name."""
    names = [event.type]
    blob = BLOB_TYPES.get(event.type)
    if blob is None and event.type == "citation":
        kind = event.data.get("sourceType")
        blob = kind if isinstance(kind, str) else None
    if blob:
        names.append(blob)
    return names


def type_matches(configured: str, actual: str) -> bool:
    want, have = configured.strip().lower(), actual.strip().lower()
    if not want or not have:
        return False
    return want == have or have in ALIASES.get(want, ())


def matches_site_update(source: dict[str, Any], event: ActivityEvent) -> bool:
    if not under(about(event), source["resourcePrefix"]):
        return False
    wanted = source.get("eventTypes")
    if not wanted:
        return True
    names = event_types(event)
    return any(type_matches(w, n) for w in wanted for n in names)


MATCHERS = {
    "document-comment": matches_document_comment,
    "user-mention": matches_user_mention,
    "site-update": matches_site_update,
}


def matches(source: dict[str, Any], event: ActivityEvent) -> bool:
    """Whether an activity trigger's (normalized) source matches the event; other sources never do."""
    matcher = MATCHERS.get(str(source.get("type")))
    return matcher is not None and matcher(source, event)


def activity_of(event: ActivityEvent) -> dict[str, Any]:
    """A firing's activity: the event's fields, and the feed's event itself (ListEvents shape) under `event`."""
    activity: dict[str, Any] = {
        "type": event.type,
        "key": event.key,
        "resource": event.resource,
        "author": event.author,
    }
    if event.target is not None:
        activity["target"] = event.target
    if event.mentions:
        activity["mentions"] = list(event.mentions)
    activity |= {
        "summary": event.summary,
        "observedAt": event.observed_at,
        "eventAt": event.event_at,
        "event": event.data,
    }
    return activity


__all__ = [
    "ACTIVITY_SOURCES",
    "about",
    "activity_of",
    "canonical",
    "event_types",
    "firing_key",
    "matches",
    "type_matches",
    "under",
]
