"""The activity matchers on their own (`triggers/matching.py`): keys, prefixes, aliases and structural mentions."""

from __future__ import annotations

from typing import Any

from mcp_harness.hypermedia.activity import ActivityEvent
from mcp_harness.triggers.matching import canonical, firing_key, matches, type_matches, under

A = "z6MkAlice"
DOC = f"hm://{A}/notes"


def event(type_: str, resource: str = DOC, **fields: Any) -> ActivityEvent:
    values: dict[str, Any] = {
        "seq": 1,
        "key": "blob-bafy1",
        "type": type_,
        "cid": "bafy1",
        "author": "z6MkBob",
        "resource": resource,
        "target": None,
        "mentions": (),
        "observed_at": 0,
        "event_at": 0,
        "summary": "",
        "data": {},
    }
    return ActivityEvent(**(values | fields))


def test_a_citation_key_collapses_onto_its_blob_and_others_stay() -> None:
    assert firing_key(f"mention-bafy1--hm://{A}") == "blob-bafy1"
    assert firing_key("blob-bafy1") == "blob-bafy1"
    assert firing_key("mention-bafy1-c-x") == "mention-bafy1-c-x"  # a typed mention keeps its own key


def test_prefixes_compare_canonical_ids_on_path_boundaries() -> None:
    assert canonical(f"{DOC}?v=bafy2#blk") == DOC
    assert under(f"{DOC}/sub", DOC) and under(DOC, f"{DOC}/") and under(DOC, f"hm://{A}")
    assert not under(f"{DOC}-old", DOC) and not under(None, DOC)


def test_event_types_take_the_legacy_aliases_case_insensitively() -> None:
    assert type_matches("Ref", "doc-update") and type_matches("change", "doc-update")
    assert type_matches("DOC-UPDATE", "Ref") and type_matches("comment", "Comment")
    assert not type_matches("comment", "doc-update") and not type_matches("", "comment")
    site = {"type": "site-update", "resourcePrefix": f"hm://{A}", "eventTypes": ["comment/Embed"]}
    cited = event("citation", "hm://z6MkElsewhere/post", target=DOC, data={"sourceType": "comment/Embed"})
    assert matches(site, cited)  # a citation is about what it cites, and answers to Seed's kind name
    assert not matches({**site, "eventTypes": ["doc/Link"]}, cited)


def test_mentions_are_structural_and_comments_match_by_account() -> None:
    mention = {"type": "user-mention", "mentionedAccounts": [A], "resourcePrefix": "hm://z6MkBob"}
    assert matches(mention, event("comment", "hm://z6MkBob/x", mentions=(A,)))
    assert not matches(mention, event("comment", "hm://z6MkBob/x", summary=f"@{A}", data={"text": A}))
    assert not matches(mention, event("comment", DOC, mentions=(A,)))  # made outside the prefix
    by = {"type": "document-comment", "resource": DOC, "author": "hm://z6MkBob"}
    assert matches(by, event("comment", f"{DOC}/child"))
    assert not matches({**by, "author": "Bob"}, event("comment"))  # a name is not an account
    assert not matches(by, event("doc-update")) and not matches({"type": "schedule"}, event("comment"))
