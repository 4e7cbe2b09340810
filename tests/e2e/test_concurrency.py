"""Concurrent writers through one server: no torn files, no lost acknowledged write, every call logged."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, text_of

pytestmark = pytest.mark.anyio


async def test_concurrent_writers_never_tear_a_file_or_lose_a_write(harness: Harness) -> None:
    bodies = {i: (f"writer {i} " * 5000) for i in range(12)}
    async with Client(build_server(harness), mode="legacy") as c:
        acknowledged: list[int] = []

        async def writer(i: int) -> None:
            await call(c, "write", {"address": "~/memory/shared.txt", "content": bodies[i]})
            await call(c, "write", {"address": f"~/memory/own/{i}.txt", "content": bodies[i]})
            acknowledged.append(i)

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in bodies:
                    tg.start_soon(writer, i)
        # Pages over 16 KiB come once, in the text block (the structured result says contentInText).
        shared = text_of(await c.call_tool("read", {"address": "~/memory/shared.txt"}))
        assert shared in bodies.values()  # whole, from exactly one writer
        for i in acknowledged:
            assert text_of(await c.call_tool("read", {"address": f"~/memory/own/{i}.txt"})) == bodies[i]
        listing = await call(c, "read", {"address": "~/memory/own/"})
        assert len(listing["entries"]) == len(bodies)  # no temp files left behind
    assert sorted(acknowledged) == sorted(bodies)
    session = harness.sessions.list(harness.account_id)[0]
    events = harness.sessions.events(session.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert sum(1 for e in events if e.type == "tool_result") == 2 * len(bodies) + len(bodies) + 2
