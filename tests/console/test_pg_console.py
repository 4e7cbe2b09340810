"""Every console page's raw reads on both backends (docs/postgres.md, "SQL outside `store/`"): the world of
tests/console/conftest.py built on SQLite and on PostgreSQL, each page read over HTTP as the owner, the same facts
on both. Cancel, the one write the console makes, is here too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.console.conftest import World, build_world, console_app
from tests.console.test_documents import _publish
from tests.store.harnesskit import BACKENDS, harness_on

pytestmark = pytest.mark.anyio
OWNER = {"Authorization": "Bearer owner-token"}


@pytest.fixture(params=BACKENDS)
def any_world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    harness = harness_on(request, tmp_path, request.param)
    harness.agent()
    try:
        yield build_world(harness)
    finally:
        harness.close()


async def _data(c: httpx2.AsyncClient, page: str, **params: str) -> dict[str, Any]:
    response = await c.get("/api/data", params={"page": page, **params}, headers=OWNER)
    assert response.status_code == 200, (page, response.text)
    html = await c.get("/api/view", params={"page": page, **params}, headers=OWNER)
    assert html.status_code == 200, (page, html.text)
    return response.json()["data"]


async def test_every_page_reads_the_same_on_both_backends(any_world: World) -> None:
    w, h = any_world, any_world.harness
    _, account = _publish(w)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=console_app(w)), base_url="http://127.0.0.1") as c:
        listed = {r["title"]: r for r in (await _data(c, "/sessions"))["sessions"]}
        assert listed["other trip"]["status"] == "live" and listed["other trip"]["unanswered"] == 1
        found = (await _data(c, "/sessions", q="secret-assistant"))["sessions"]
        assert [r["title"] for r in found] == ["assistant trip"]
        assert (await _data(c, "/sessions", status="succeeded"))["sessions"] == []
        child = h.sessions.create(
            h.account_id, w.agents["assistant"], title="helper", parent_session_id=w.sessions["assistant"]
        )
        session = await _data(c, f"/sessions/{w.sessions['assistant']}")
        assert [r["id"] for r in session["runs"]] == [w.roots["assistant"]] and session["unanswered"] == 1
        assert session["earlier"] == 0 and [x["id"] for x in session["children"]] == [child.id]
        runs = (await _data(c, "/runs"))["runs"]
        assert {r["id"] for r in runs} == set(w.roots.values())
        tree = await _data(c, f"/runs/{w.roots['other']}")
        assert tree["run"]["id"] == w.roots["other"] and "2 done" in tree["run"]["waitReason"]
        assert {a["name"] for a in (await _data(c, "/agents"))["agents"]} == {"assistant", "other"}
        await _data(c, f"/agents/{w.agents['other']}")
        await _data(c, "/triggers")
        accounts = (await _data(c, "/documents"))["accounts"]
        assert [(a["id"], a["documents"]) for a in accounts] == [(account, 4)]
        document = await _data(c, f"/documents/{account}")
        assert len(document["versions"]) == 2 and document["totalComments"] == 1
        cancel = await c.post(f"/api/runs/{w.roots['other']}/cancel", json={}, headers=OWNER)
        assert cancel.status_code == 200, cancel.text
    assert h.runs.find(w.roots["other"]).status == "canceled"  # pyright: ignore[reportOptionalMemberAccess]
