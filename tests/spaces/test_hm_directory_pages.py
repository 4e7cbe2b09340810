"""`/:directory` and `/:comments` are pages (issue 15): `options.limit` (1–500, default 100), a total, and a
`nextCursor` while more remain; a cursor is only accepted back where it was given, and options page nothing else."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_harness.identity.identities import Identity
from tests.conftest import call, refused

pytestmark = pytest.mark.anyio


async def _publish(client: Client, base: str, paths: list[str]) -> None:
    for path in paths:
        await call(client, "write", {"address": f"{base}{path}", "content": "Text.", "options": {"name": path}})


async def test_pages_follow_the_cursor_to_the_end_in_path_order(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    children = [f"/shelf/{n:02}" for n in (5, 1, 7, 3, 2, 6, 4)]
    await _publish(client, base, ["/shelf", *children, "/shelf/01/deep", "/other"])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        options = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = await call(client, "read", {"address": f"{base}/shelf/:directory", "options": options})
        pages += 1
        assert page["totalDocuments"] == 7
        seen += [e["path"] for e in page["documents"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            assert page["summary"].endswith("This page holds 1, the last.")
            break
        assert len(page["documents"]) == 3 and "pass options.cursor for the next" in page["summary"]
    assert pages == 3 and seen == sorted(children)
    whole = await call(client, "read", {"address": f"{base}/shelf/:directory"})
    assert [e["path"] for e in whole["documents"]] == sorted(children) and "nextCursor" not in whole
    assert whole["summary"] == f"{base}/shelf has 7 child documents."  # one page: the summary it always had
    first = next(e for e in whole["documents"] if e["path"] == "/shelf/01")
    assert first["childrenCount"] == 1


async def test_bad_pages_are_refused_naming_what_is_accepted(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await _publish(client, base, ["/a", "/a/x", "/a/y", "/b", "/b/z"])
    page = await call(client, "read", {"address": f"{base}/a/:directory", "options": {"limit": 1}})
    for limit in (0, 501, "ten", True, 2.5):
        error = await refused(client, "read", {"address": f"{base}/a/:directory", "options": {"limit": limit}})
        assert "limit must be an integer from 1 to 500" in error["message"], limit
    elsewhere = await refused(
        client, "read", {"address": f"{base}/b/:directory", "options": {"cursor": page["nextCursor"]}}
    )
    assert "cursor must be the nextCursor of an earlier page of this directory" in elsewhere["message"]
    for junk in ("!!", "", 7):
        error = await refused(client, "read", {"address": f"{base}/a/:directory", "options": {"cursor": junk}})
        assert "cursor must be the nextCursor" in error["message"], junk
    on_a_document = await refused(client, "read", {"address": f"{base}/a", "options": {"limit": 2}})
    assert "page the /:directory and /:comments views only" in on_a_document["message"]
    unknown = await refused(client, "read", {"address": f"{base}/a/:directory", "options": {"depth": 2}})
    assert 'does not understand option "depth"' in unknown["message"] and "cursor, limit" in unknown["message"]


async def test_comments_are_paged_oldest_first_with_a_total(client: Client, alice: Identity) -> None:
    url = f"hm://{alice.account_id}/talk"
    await call(client, "write", {"address": url, "content": "Discuss.", "options": {"name": "Talk"}})
    for i in range(5):
        await call(client, "write", {"address": url, "content": f"Remark {i}.", "options": {"action": "comment"}})
    whole = await call(client, "read", {"address": f"{url}/:comments"})
    assert whole["totalComments"] == 5 and "nextCursor" not in whole
    assert whole["summary"] == f"{url} has 5 comments."  # one page: the summary it always had
    seen: list[str] = []
    cursor = None
    while True:
        options = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = await call(client, "read", {"address": f"{url}/:comments", "options": options})
        assert page["totalComments"] == 5
        seen += [c["id"] for c in page["comments"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert seen == [c["id"] for c in whole["comments"]]
    assert [c["markdown"] for c in whole["comments"]] == [f"Remark {i}." for i in range(5)]
    bad = await refused(client, "read", {"address": f"{url}/:comments", "options": {"cursor": "nope"}})
    assert "cursor must be the nextCursor of an earlier page of these comments" in bad["message"]
