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

from mcp_harness.hypermedia.activity import ActivityEvent
from mcp_harness.hypermedia.activity_match import account_of, any_type_matches, canonical, type_matches, under
from mcp_harness.store.triggers import WATCHED_SOURCES

ACTIVITY_SOURCES = WATCHED_SOURCES
"""The source types the activity monitor evaluates."""


def firing_key(event_key: str) -> str:
    """The dedupe key of a firing for an event: its feed key, a citation's collapsed onto `blob-<cid>`."""
    if event_key.startswith("mention-"):
        rest = event_key.removeprefix("mention-")
        cid, separator, _ = rest.partition("--")
        if separator and cid:
            return f"blob-{cid}"
    return event_key


def matches_document_comment(source: dict[str, Any], event: ActivityEvent) -> bool:
    if event.type != "comment" or not under(event.resource, source["resource"]):
        return False
    author = source.get("author")
    return author is None or account_of(str(author)) == event.author


def matches_user_mention(source: dict[str, Any], event: ActivityEvent) -> bool:
    if not set(event.mentions) & set(source["mentionedAccounts"]):
        return False
    prefix = source.get("resourcePrefix")
    return prefix is None or under(event.resource, prefix)


def about(event: ActivityEvent) -> str:
    """What a site-update prefix is matched against: a citation by what it cites, any other event by its resource."""
    return (event.target or event.resource) if event.type == "citation" else event.resource


def matches_site_update(source: dict[str, Any], event: ActivityEvent) -> bool:
    if not under(about(event), source["resourcePrefix"]):
        return False
    wanted = source.get("eventTypes")
    return not wanted or any_type_matches(wanted, event.type, event.data)


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
    "firing_key",
    "matches",
    "type_matches",
    "under",
]
