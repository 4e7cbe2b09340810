"""The one matcher of activity events: how triggers (triggers/matching.py) and scripts' `wait_for_event` waits
(runs/signals.py) decide that an event is the one asked for, as the reference's shared `activityMatches` does.

- Event types compare case-insensitively, with the reference's legacy aliases (`Ref`, `Change` and
  `document-update` mean `doc-update`) and Seed's own blob type names (`Comment`, `Capability`, `Contact`, a
  citation's `comment/Embed` and the like) answering for their events.
- Authors are account ids; `hm://<account>` names the same account.
- Resources compare canonically: an `hm://` id without version or fragment, unless the wanted one names a version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.ids import pack_hm_id, parse_hm_id

BLOB_TYPES = {"comment": "Comment", "doc-update": "Ref", "capability": "Capability", "contact": "Contact"}
"""Seed's blob type name of each event type (a citation's is its `sourceType`, e.g. `comment/Embed`)."""
ALIASES: dict[str, tuple[str, ...]] = {
    "change": ("doc-update", "document-update", "ref"),
    "ref": ("doc-update", "document-update", "change"),
    "doc-update": ("change", "ref", "document-update"),
    "document-update": ("change", "ref", "doc-update"),
}
"""The reference's `activityTypeMatches` aliases, keyed by the configured type (lowercase)."""


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


def same_resource(wanted: str, actual: str) -> bool:
    """Whether an event about `actual` is about `wanted`: the same hm:// id, any version unless `wanted` names one."""
    try:
        want, got = parse_hm_id(wanted), parse_hm_id(actual)
    except BadRequest:
        return canonical(wanted.strip()) == canonical(actual.strip())
    if want.version is None:
        return want.id == got.id
    return pack_hm_id(want) == pack_hm_id(got)


def account_of(value: str) -> str:
    """An account id as given, or the account of an `hm://<account>/…` id."""
    text = value.strip()
    if text.startswith("hm://"):
        try:
            return parse_hm_id(text).uid
        except BadRequest:
            return text
    return text


def event_types(event_type: str, data: Mapping[str, Any] | None = None) -> list[str]:
    """The names an event answers to: its type and Seed's blob type name (a citation's from its `sourceType`)."""
    names = [event_type]
    blob = BLOB_TYPES.get(event_type)
    if blob is None and event_type == "citation" and data is not None:
        kind = data.get("sourceType")
        blob = kind if isinstance(kind, str) else None
    if blob:
        names.append(blob)
    return names


def type_matches(configured: str, actual: str) -> bool:
    want, have = configured.strip().lower(), actual.strip().lower()
    if not want or not have:
        return False
    return want == have or have in ALIASES.get(want, ())


def any_type_matches(wanted: list[str] | tuple[str, ...], event_type: str, data: Mapping[str, Any] | None) -> bool:
    names = event_types(event_type, data)
    return any(type_matches(w, n) for w in wanted for n in names)


def fields_match(match: Mapping[str, Any], event_type: str, resource: str, author: str, data: Any = None) -> bool:
    """A wait's `{eventType?, resource?, author?}` against an event: every field present must match."""
    if "eventType" in match and not any_type_matches([str(match["eventType"])], event_type, data):
        return False
    if "author" in match and account_of(str(match["author"])) != author:
        return False
    return "resource" not in match or same_resource(str(match["resource"]), resource)
