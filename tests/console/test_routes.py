"""The console's routes over HTTP: the same guard as `/mcp` (Host, Origin, bearer token; a public bind refuses
the unauthenticated), agent-scoped tokens that see only their agent, cancel, download, and the live stream that
sends a page again only when its data changed (and resumes from `Last-Event-ID`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

from tests.conftest import serving
from tests.console.conftest import World, console_app

pytestmark = pytest.mark.anyio
OWNER = {"Authorization": "Bearer owner-token"}
OTHER = {"Authorization": "Bearer other-token"}
MISSING = "00000000-0000-4000-8000-000000000000"


def client(app: Any, host: str = "127.0.0.1") -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{host}")


async def test_the_shell_is_public_but_every_api_route_wants_a_token(world: World) -> None:
    async with client(console_app(world)) as c:
        for path in ("/", "/sessions", f"/runs/{world.roots['other']}", "/static/console.js", "/static/console.css"):
            page = await c.get(path)
            assert page.status_code == 200, path
            assert "default-src 'none'" in page.headers["content-security-policy"]
            assert "secret" not in page.text and world.roots["other"] not in page.text
        for path in ("/api/view?page=/sessions", "/api/data?page=/runs", "/api/stream?page=/"):
            refused = await c.get(path)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert (await c.post(f"/api/runs/{world.roots['other']}/cancel", json={})).status_code == 401
        assert (await c.get("/api/view?page=/sessions", headers={"Authorization": "Bearer wrong"})).status_code == 401
        shown = await c.get("/api/view?page=/sessions", headers=OWNER)
        assert shown.status_code == 200 and "assistant trip" in shown.json()["html"]
        session = (await c.get(f"/api/view?page=/sessions/{world.sessions['other']}", headers=OWNER)).json()["html"]
        assert "secret-other plan" in session and "<summary>raw JSON</summary>" in session
        assert "&quot;summary&quot;: &quot;read a.md&quot;" in session


async def test_a_public_bind_refuses_the_unauthenticated_and_checks_host_and_origin(world: World) -> None:
    public = console_app(world, host="0.0.0.0", loopback=False)
    async with client(public, host="203.0.113.9:8080") as c:
        assert (await c.get("/api/data?page=/sessions")).status_code == 401
        assert (await c.get("/api/data?page=/sessions", headers=OWNER)).status_code == 200
    async with client(console_app(world, tokens=False)) as c:  # loopback without tokens: the owner, no token
        assert (await c.get("/api/data?page=/sessions")).status_code == 200
        for path in ("/", "/api/data?page=/sessions"):
            rebound = await c.get(path, headers={"Host": "attacker.example"})
            assert rebound.status_code == 421
        evil = await c.post(f"/api/runs/{world.roots['other']}/cancel", headers={"Origin": "https://evil.example"})
        assert evil.status_code == 403
    assert world.harness.runs.get(world.roots["other"]).status == "waiting"


async def test_an_agent_token_sees_only_its_agent_and_the_rest_reads_as_missing(world: World) -> None:
    async with client(console_app(world)) as c:
        listed = (await c.get("/api/data?page=/sessions", headers=OTHER)).json()["data"]
        assert [s["title"] for s in listed["sessions"]] == ["other trip"]
        runs = (await c.get("/api/data?page=/runs", headers=OTHER)).json()["data"]["runs"]
        assert [r["id"] for r in runs] == [world.roots["other"]]
        agents = (await c.get("/api/data?page=/agents", headers=OTHER)).json()["data"]["agents"]
        assert [a["name"] for a in agents] == ["other"]
        for kind, real in (("sessions", world.sessions["assistant"]), ("runs", world.roots["assistant"])):
            hidden = await c.get(f"/api/view?page=/{kind}/{real}", headers=OTHER)
            missing = await c.get(f"/api/view?page=/{kind}/{MISSING}", headers=OTHER)
            assert hidden.status_code == missing.status_code == 404
            assert hidden.json()["message"].replace(real, MISSING) == missing.json()["message"]
        hidden = await c.post(f"/api/runs/{world.roots['assistant']}/cancel", headers=OTHER, json={})
        assert hidden.status_code == 404
        mine = await c.get(f"/api/view?page=/runs/{world.roots['other']}", headers=OTHER)
        assert mine.status_code == 200 and "other child 1" in mine.json()["html"]
    assert world.harness.runs.get(world.roots["assistant"]).status == "waiting"


async def test_cancel_ends_the_tree_once_and_memory_downloads_as_bytes(world: World) -> None:
    h = world.harness
    agent = h.agents.get(world.agents["other"])
    h.memory(agent).write_file("notes/a.md", b"# hello\n")
    async with client(console_app(world)) as c:
        done = await c.post(f"/api/runs/{world.roots['other']}/cancel", headers=OTHER, json={})
        assert done.status_code == 200 and done.json() == {"runId": world.roots["other"], "canceled": True}
        again = await c.post(f"/api/runs/{world.roots['other']}/cancel", headers=OTHER, json={})
        assert again.status_code == 409 and "already canceled" in again.json()["message"]
        page = (await c.get(f"/api/view?page=/runs/{world.roots['other']}", headers=OTHER)).json()["html"]
        assert 'data-status="canceled"' in page and "data-cancel" not in page
        raw = await c.get(f"/api/agents/{agent.id}/memory/raw?path=notes/a.md", headers=OTHER)
        assert raw.content == b"# hello\n" and "a.md" in raw.headers["content-disposition"]
        listing = (await c.get(f"/api/view?page=/agents/{agent.id}/memory&path=notes", headers=OTHER)).json()
        assert listing["title"] == "other memory"
        shown = (await c.get(f"/api/view?page=/agents/{agent.id}/memory", headers=OTHER)).json()["html"]
        assert "notes/" in shown
        foreign = await c.get(f"/api/agents/{world.agents['assistant']}/memory/raw?path=x", headers=OTHER)
        assert foreign.status_code == 404
        page = (await c.get(f"/api/view?page=/agents/{agent.id}", headers=OTHER)).json()["html"]
        assert "scripted" in page and "Grants" in page
    assert h.runs.get(world.roots["other"]).status == "canceled"


async def _views(response: httpx2.Response) -> AsyncIterator[dict[str, Any]]:
    """The `view` events of a stream, each with its id."""
    event, data, ident = "message", "", None
    async for line in response.aiter_lines():
        if line == "":
            if event == "view" and data:
                yield {**json.loads(data), "id": ident}
            event, data, ident = "message", "", None
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()


async def test_the_stream_sends_a_page_again_only_when_it_changed(world: World) -> None:
    h = world.harness
    path = f"/api/stream?page=/runs/{world.roots['other']}"
    async with serving(console_app(world)) as base, httpx2.AsyncClient(base_url=base, timeout=30) as c:
        with anyio.fail_after(20):
            async with c.stream("GET", path, headers=OTHER) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                views = _views(response)
                first = await anext(views)
                assert first["id"] == first["version"] and "other child 2" in first["html"]
                await anyio.to_thread.run_sync(h.runs.add_usage, world.children["other"][1], {"input": 7, "output": 0})
                second = await anext(views)
                assert second["version"] != first["version"] and "47 tokens" in second["html"]
            # Reconnecting with the last id sends nothing until the page changes again.
            async with c.stream("GET", path, headers={**OTHER, "Last-Event-ID": second["version"]}) as response:
                views = _views(response)
                await anyio.to_thread.run_sync(h.runs.add_usage, world.children["other"][0], {"input": 1, "output": 0})
                third = await anext(views)
                assert "48 tokens" in third["html"]
            async with c.stream("GET", f"/api/stream?page=/runs/{world.roots['assistant']}", headers=OTHER) as gone:
                assert gone.status_code == 404
