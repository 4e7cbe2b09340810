"""The `activity:` space: the embedded node's activity feed, as Seed's ListEvents (HARNESS §11.2, HYPERMEDIA §4).

The reference harness asks the configured Seed server; here the node is embedded, so the feed is its own: every
comment, document update, capability, contact and citation it has stored, published here or ingested from
elsewhere (`store/hm_activity.py`). `currentAccount` defaults to the agent's first signing identity, as the
reference passes the caller's account: it names contacts the way that account does and anchors `trustedOnly`.
"""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.spaces.space import Space
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

READ_OPTIONS = ("pageSize", "pageToken", "authors", "eventTypes", "resource", "trustedOnly", "currentAccount")


def read_activity(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    from mcp_harness.hypermedia.node import Node

    refuse_unknown_options("read activity:", options, READ_OPTIONS)
    params = dict(options)
    if params.get("currentAccount") is None:
        params.pop("currentAccount", None)
        account = _own_account(ctx)
        if account is not None:
            params["currentAccount"] = account
    node: Node = ctx.services.hypermedia
    response = node.activity.list_events(**params)
    events: list[dict[str, Any]] = response["events"]
    count = len(events)
    data = {"summary": f"Loaded {count} activity feed event{'' if count == 1 else 's'}.", **response}
    lines = [f"- {e.get('time', '')} {e['type']} ({e['feedEventId']}): {_line(e)}" for e in events]
    if response["nextPageToken"]:
        lines.append(f"More: pass options.pageToken {response['nextPageToken']!r}.")
    return VerbResult.of(data, "\n".join(lines) or None, fmt=fmt)


def _own_account(ctx: VerbContext) -> str | None:
    from mcp_harness.identity.identities import identities_of

    identities = identities_of(ctx.services, ctx.agent.definition)
    return identities[0].account_id if identities else None


def _name(item: object) -> str:
    if not isinstance(item, dict):
        return "?"
    metadata = item.get("metadata")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    name = metadata.get("name") if isinstance(metadata, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    ident = item.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    uid = ident.get("id") if isinstance(ident, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return f"{name} ({uid})" if name else str(uid)  # pyright: ignore[reportUnknownArgumentType]


def _line(event: dict[str, Any]) -> str:
    """One line a model can act on: who did what, where."""
    author = _name(event.get("author"))
    kind = event["type"]
    if kind == "comment":
        return f"{author} commented hm://{event['comment']['id']} on {_name(event.get('target'))}"
    if kind == "doc-update":
        return f"{author} updated {event['docId']['id']}?v={event['docId']['version']}"
    if kind == "capability":
        delegates = ", ".join(_name(d) for d in event["delegates"])
        return f"{author} made {delegates} a writer of {event['capabilityId']['id']}"
    if kind == "contact":
        return f"{author} added {_name(event['contact']['subject'])} as a contact"
    return f"{author} cited {_name(event.get('target'))} in {_name(event.get('source'))}"


SPACE = Space(
    name="activity",
    kinds=("activity",),
    read=read_activity,
    read_options=READ_OPTIONS,
    read_form="activity:",
    read_line="""- `activity:`: the node's activity feed, newest first (options pageSize, pageToken, authors, eventTypes, resource, trustedOnly, currentAccount).""",  # noqa: E501
    read_details="""## `activity:`
The embedded hypermedia node's activity feed, as Seed's ListEvents: `{events, nextPageToken, totalEvents}`, newest observed first. Events are comment, doc-update, capability, contact and citation (a link or embed of an hm:// id in a document or comment; a link to `hm://<account>` is an @mention of it — plain "@name" text is not).
- `pageSize` 1–50 (default 20; clamped); `pageToken`: the `nextPageToken` of the page before ("" on the last).
- `authors`: account ids; `eventTypes`: those types (or Seed's Ref, Comment, doc/Link, comment/Embed, …); `resource`: an hm:// id (a citation matches by what it cites; end with `*` for a prefix).
- `currentAccount` (default: your first signing identity) names accounts as its contacts do; `trustedOnly: true` keeps events by it and its contacts.""",  # noqa: E501
)
