"""Live resources over real Streamable HTTP: a handshake-era subscription's updates ride the session's stream, a
2026-07-28 listen stream is an SSE response, and an agent-scoped token cannot watch another agent's run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from tests.conftest import call, owner_and_other, serving
from tests.server.test_subscriptions import STEPS, Updates, _subscribe

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _client(base: str, token: str, mode: str, updates: Updates | None = None) -> AsyncIterator[Client]:
    transport = streamable_http_client(
        f"{base}/mcp", http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    )
    async with Client(transport, mode=mode, message_handler=updates) as c:  # pyright: ignore[reportArgumentType]
        yield c


async def test_both_eras_over_http_with_scoped_tokens(harness: Harness) -> None:
    app = http_app(build_server(harness), host="127.0.0.1", http=owner_and_other(harness))
    mine = harness.runs.enqueue(account_id=harness.account_id, title="t", origin="user", agent_id=harness.agent().id)
    async with serving(app) as base:
        with anyio.fail_after(30):
            updates = Updates()
            async with _client(base, "owner-token", "legacy", updates) as c:
                await call(c, "plan", {"steps": STEPS})
                await _subscribe(c, "harness://plan")
                await call(c, "plan", {"steps": [{**STEPS[0], "status": "done"}]})
                await updates.wait_for("harness://plan")
            async with _client(base, "owner-token", "2026-07-28") as c:
                await call(c, "plan", {"steps": STEPS})
                async with c.listen(resource_subscriptions=["harness://plan"]) as sub:
                    await call(c, "plan", {"steps": [{**STEPS[0], "status": "done"}]})
                    assert await sub.__anext__() == ResourceUpdated("harness://plan")
            for mode in ("legacy", "2026-07-28"):
                async with _client(base, "other-token", mode) as c:
                    with pytest.raises(MCPError) as info:
                        if mode == "legacy":
                            await _subscribe(c, f"run:{mine.id}")
                        else:
                            async with c.listen(resource_subscriptions=[f"run:{mine.id}"]):
                                pass
                    assert info.value.message == f"No run {mine.id}."
