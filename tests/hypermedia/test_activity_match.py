"""One matcher for activity: a script's `wait_for_event` match and a trigger's source read an event the same way —
the type aliases, `hm://` authors and canonical resources (hypermedia/activity_match.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_harness.runs.signals import accepts_activity
from mcp_harness.triggers.matching import matches

ALICE = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
DOC = f"hm://{ALICE}/notes"
VERSION = "bafyreih5ypqbbclv2qfqg6dlrw5ytlcaqjzvgl6yq4j5wfdatxwqqd6vqm"


@dataclass(frozen=True)
class Event:
    type: str
    resource: str
    author: str
    target: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


def test_a_wait_takes_the_legacy_type_aliases_a_site_update_trigger_takes() -> None:
    update = Event("doc-update", f"{DOC}?v={VERSION}", ALICE)
    for name in ("Ref", "change", "document-update", "DOC-UPDATE"):
        assert accepts_activity({"eventType": name}, update)
        assert matches({"type": "site-update", "resourcePrefix": DOC, "eventTypes": [name]}, update)  # type: ignore[arg-type]
    assert not accepts_activity({"eventType": "comment"}, update)


def test_a_citation_answers_to_its_source_type_in_both() -> None:
    citation = Event("citation", DOC, ALICE, target=DOC, data={"sourceType": "comment/Embed"})
    assert accepts_activity({"eventType": "comment/Embed"}, citation)
    assert matches({"type": "site-update", "resourcePrefix": DOC, "eventTypes": ["comment/embed"]}, citation)  # type: ignore[arg-type]


def test_an_author_is_an_account_id_or_its_hm_url() -> None:
    comment = Event("comment", DOC, ALICE)
    assert accepts_activity({"author": f"hm://{ALICE}"}, comment)
    assert accepts_activity({"author": ALICE, "eventType": "Comment"}, comment)
    assert not accepts_activity({"author": "Alice"}, comment)  # a profile name is not an account


def test_a_wait_resource_is_one_document_any_version_unless_named() -> None:
    versioned = Event("comment", f"{DOC}?v={VERSION}", ALICE)
    assert accepts_activity({"resource": DOC}, versioned)
    assert accepts_activity({"resource": f"{DOC}?v={VERSION}"}, versioned)
    assert not accepts_activity({"resource": f"{DOC}?v={VERSION[:-1]}a"}, versioned)
    assert not accepts_activity({"resource": f"{DOC}/sub"}, versioned)  # a wait names a document, not a prefix
    assert not accepts_activity({}, versioned)  # `{}` matches no activity
