"""The path a `call` of an upstream tool takes inside the harness (issue 20's latency point): it logs the call (with its
context and the tool's document) and its answer on the event loop when the database is free, hops to a worker thread
when it is not, and a look-up that fails where the call is logged still leaves the call with exactly one answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from mcp_harness.callables import upstream_call
from mcp_harness.harness import Harness
from tests.conftest import call
from tests.store.holding import held_by_another_thread

pytestmark = pytest.mark.anyio

CALL_PATH = ("SessionBinding.", "Harness.", "ServerState.", "find_tool", "SessionStore.", "Database.")
"""Hops of the verb path; the engine's own background hops (scheduler, monitor) are not the call's."""


def _hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        name = getattr(fn, "__qualname__", repr(fn))
        if name.startswith(CALL_PATH):
            seen.append(name)
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return seen


async def test_a_call_stays_on_the_event_loop_to_log_it_and_its_answer_when_the_database_is_free(
    fx_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = {"tool": "mcp__fx__add", "input": {"a": 1, "b": 2}}
    await call(fx_client, "call", arguments)  # the first call creates the session (on a worker thread)
    hops = _hops(monkeypatch)
    assert await call(fx_client, "call", arguments) == {"total": 3}
    assert hops == []


async def test_a_call_while_another_thread_holds_the_database_hops_and_is_logged_and_answered_once(
    fx_client: Client, fixture_harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = {"tool": "mcp__fx__echo", "input": {"text": "busy"}}
    await call(fx_client, "call", arguments)
    hops = _hops(monkeypatch)
    answer: list[Any] = []
    with held_by_another_thread(fixture_harness.db) as release:
        async with anyio.create_task_group() as tg:

            async def calling() -> None:
                answer.append(await call(fx_client, "call", arguments))

            tg.start_soon(calling)
            while not hops:  # the call found the database held and went to a worker thread to wait for it
                await anyio.sleep(0.01)
            release.set()
    assert answer == [{"result": "busy"}]
    assert hops[0] == "Database._in_transaction"
    session = fixture_harness.sessions.list(fixture_harness.account_id)[0]
    payloads = [e.payload for e in fixture_harness.sessions.events(session.id)]
    call_id = payloads[-1]["toolCallId"]
    mine = [p["type"] for p in payloads if call_id in (p.get("id"), p.get("toolCallId"))]
    assert mine == ["tool_call", "tool_result"]


async def test_a_look_up_failing_where_the_call_is_logged_still_answers_the_call_once(
    fx_client: Client, fixture_harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    broke: list[str] = []

    def broken(_: Any, name: str) -> Any:
        broke.append(name)
        raise RuntimeError("the prepared look-up broke")

    monkeypatch.setattr(upstream_call, "prepare", broken)
    arguments = {"tool": "mcp__fx__echo", "input": {"text": "once"}}
    assert await call(fx_client, "call", arguments) == {"result": "once"}  # the verb looked the tool up itself
    assert broke == ["mcp__fx__echo"]
    session = fixture_harness.sessions.list(fixture_harness.account_id)[0]
    payloads = [e.payload for e in fixture_harness.sessions.events(session.id)]
    call_id = payloads[-1]["toolCallId"]
    logged = [p for p in payloads if p.get("id") == call_id]
    assert len(logged) == 1 and logged[0]["type"] == "tool_call" and logged[0]["input"] == arguments
    answers = [p for p in payloads if p.get("toolCallId") == call_id]
    assert len(answers) == 1 and answers[0]["output"]["text"] == "once"
