"""The console in a real headless Chromium against a real loopback server with the engine running: a script tree
started through a real MCP client appears, updates live to `succeeded` without a reload and shows rolled-up tokens;
cancel from the page cancels the whole tree; an agent-scoped token's console shows only its agent.

Screenshots are saved as test artifacts (a tmp dir, printed on failure by pytest's tmp_path retention) and the
run page's is the README's `docs/console.png` (rewritten when missing or with MCP_HARNESS_SCREENSHOT=1).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_harness.config import HttpSettings
from mcp_harness.harness import Harness
from mcp_harness.runs import signals
from mcp_harness.server import build_server, http_app
from tests.conftest import call, owner_and_other, scripted_harness, serving
from tests.console.browser import Browser

pytestmark = pytest.mark.anyio
DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"
RULES: list[dict[str, Any]] = [
    {"when": "Research flights", "turns": [{"text": "Three flights found.", "usage": {"input": 1200, "output": 300}}]},
    {"when": "Research hotels", "turns": [{"text": "Two hotels found.", "usage": {"input": 800, "output": 200}}]},
    {"when": "Summarize", "turns": [{"text": "Book the 9:40 flight.", "usage": {"input": 500, "output": 100}}]},
    {"when": "Slow worker", "turns": [{"text": "never seen", "delayMs": 600_000}]},
    {"turns": [{"text": "done"}]},
]
TRIP = """
def main(ctx):
    ctx.plan(["Research", "Wait for the go-ahead", "Summarize"], title="Plan the trip")
    found = ctx.step("Research", lambda: ctx.delegate_all([
        {"brief": "Research flights", "title": "Flights"},
        {"brief": "Research hotels", "title": "Hotels"},
    ]))
    ctx.log("info", "research done", {"found": len(found)})
    ctx.step("Wait for the go-ahead", lambda: ctx.wait_for_event(signal="go", label="go-ahead"))
    summary = ctx.step("Summarize", lambda: ctx.delegate({"brief": "Summarize the findings", "title": "Summary"}))
    return {"summary": summary["text"]}
"""
STUCK = """
def main(ctx):
    return ctx.parallel([
        lambda: ctx.delegate({"brief": "Slow worker", "title": "Slow"}),
        lambda: ctx.wait_for_event(signal="never"),
    ])
"""


@pytest.fixture
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-screenshots")


@asynccontextmanager
async def console(harness: Harness, http: HttpSettings) -> AsyncIterator[str]:
    app = http_app(build_server(harness), host="127.0.0.1", http=http, console=harness)
    # force_exit: the page's live stream stays open until the server goes (see `serve_http`'s shutdown grace).
    async with harness.engine_running(), serving(app, force_exit=True) as base:
        yield base


def mcp(base: str, token: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(base + "/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=60))
    return Client(transport, mode="legacy")  # pyright: ignore[reportArgumentType]


async def root_run(harness: Harness, title: str, *, status: str, reason: str | None = None) -> str:
    """The id of the root run titled `title`, once it has `status` (and that wait reason)."""
    while True:
        with harness.db.reading() as conn:
            row = conn.execute("SELECT id FROM runs WHERE title = ? AND parent_run_id IS NULL", (title,)).fetchone()
        run = harness.runs.find(row[0]) if row else None
        if run is not None and run.status == status and (reason is None or (run.wait or {}).get("reason") == reason):
            return run.id
        await anyio.sleep(0.05)


async def test_a_run_tree_appears_updates_live_to_succeeded_and_shows_rolled_up_tokens(
    tmp_path: Path, browser: Browser, artifacts: Path
) -> None:
    harness = scripted_harness(tmp_path, RULES)
    try:
        async with console(harness, HttpSettings()) as base, mcp(base) as client, anyio.create_task_group() as tg:
            answers: list[dict[str, Any]] = []

            async def start() -> None:
                answers.append(await call(client, "delegate", {"script": TRIP, "title": "Plan the trip"}))

            tg.start_soon(start)
            with anyio.fail_after(60):
                run_id = await root_run(harness, "Plan the trip", status="waiting", reason="event")
                await browser.get(f"{base}/runs/{run_id}")
                await browser.until(
                    "return document.querySelector('.run-card[data-status=waiting]')", what="the live run card"
                )
                await browser.js("window.__sameDocument = 'yes'")
                nodes = await browser.js("return document.querySelectorAll('svg.run-tree a.tree-node').length")
                assert nodes == 3
                banner = await browser.js("return document.querySelector('.banner.wait').textContent")
                assert banner == "Waiting for an event (go-ahead)"
                assert await browser.js("return document.querySelector('.rolled').dataset.total") == "2500"
                await browser.screenshot(artifacts / "run-waiting.png")
                await anyio.to_thread.run_sync(
                    lambda: signals.deliver_signal(
                        harness.runs, account_id=harness.account_id, run_id=run_id, signal="go", payload=None
                    )
                )
                await browser.until(
                    "return document.querySelector('.run-card[data-status=succeeded]')", what="the run succeeded"
                )
            assert await browser.js("return window.__sameDocument") == "yes"  # updated in place, never reloaded
            assert await browser.js("return document.querySelector('.rolled').dataset.total") == "3100"
            assert await browser.js("return document.querySelectorAll('svg.gantt rect.bar').length") == 4
            assert await browser.js("return document.querySelectorAll('svg.usage-chart').length") == 1
            assert await browser.js("return document.querySelector('#live').dataset.state") == "live"
            assert answers and answers[0]["status"] == "succeeded"
            await browser.screenshot(artifacts / "run-succeeded.png", height=1500)
            if not DOCS_SHOT.exists() or os.environ.get("MCP_HARNESS_SCREENSHOT") == "1":
                await browser.screenshot(DOCS_SHOT, height=1500)
    finally:
        harness.close()


async def test_cancel_from_the_page_cancels_the_whole_tree(tmp_path: Path, browser: Browser, artifacts: Path) -> None:
    harness = scripted_harness(tmp_path, RULES)
    try:
        async with console(harness, HttpSettings()) as base, mcp(base) as client, anyio.create_task_group() as tg:
            answers: list[dict[str, Any]] = []

            async def start() -> None:
                answers.append(await call(client, "delegate", {"script": STUCK, "title": "Stuck tree"}))

            tg.start_soon(start)
            with anyio.fail_after(60):
                run_id = await root_run(harness, "Stuck tree", status="waiting")
                while not any(c.status == "running" for c in harness.runs.children(run_id)):
                    await anyio.sleep(0.05)
                await browser.get(f"{base}/runs/{run_id}")
                await browser.until("return document.querySelector('button.cancel')", what="the cancel button")
                await browser.click("button.cancel")  # arms it
                await browser.until("return document.querySelector('button.cancel[data-armed]')", what="armed")
                await browser.click("button.cancel")
                await browser.until(
                    "return document.querySelector('.run-card[data-status=canceled]')", what="the run canceled"
                )
                while not answers:
                    await anyio.sleep(0.05)
            statuses = {c.status for c in harness.runs.children(run_id)}
            assert harness.runs.get(run_id).status == "canceled" and statuses == {"canceled"}
            assert answers[0]["status"] == "canceled"
            assert await browser.js("return document.querySelector('button.cancel')") is None
            await browser.screenshot(artifacts / "run-canceled.png")
    finally:
        harness.close()


async def test_an_agent_token_signs_in_and_sees_only_its_agent(
    tmp_path: Path, browser: Browser, artifacts: Path
) -> None:
    harness = scripted_harness(tmp_path, RULES)
    try:
        harness.agent()
        http = owner_and_other(harness)
        ids = {a.definition.name: a.id for a in harness.agents.list(harness.account_id)}
        mine = harness.sessions.create(harness.account_id, ids["other"], title="other's notes")
        theirs = harness.sessions.create(harness.account_id, ids["assistant"], title="assistant's secret")
        async with console(harness, http) as base:
            with anyio.fail_after(60):
                await browser.get(f"{base}/sessions")
                await browser.until("return !document.querySelector('#login').hidden", what="the login form")
                await browser.js(
                    "const f = document.querySelector('#login'); f.elements.token.value = 'other-token';"
                    "f.requestSubmit()"
                )
                await browser.until(
                    "return document.querySelector('table.sessions tbody tr[data-session]')", what="the sessions"
                )
                rows = await browser.js(
                    "return [...document.querySelectorAll('table.sessions tr[data-session]')]"
                    ".map(r => r.dataset.session)"
                )
                assert rows == [mine.id]
                text = await browser.js("return document.body.innerText")
                assert "assistant's secret" not in text
                await browser.screenshot(artifacts / "scoped-sessions.png")
                await browser.get(f"{base}/sessions/{theirs.id}")  # same tab: the token stays in sessionStorage
                message = await browser.until(
                    "const p = document.querySelector('#content .err'); return p && p.textContent", what="not found"
                )
                assert message == f"No thread {theirs.id}. read thread: lists the threads you can see."
    finally:
        harness.close()
