"""`ctx.wait_for_event` and SignalRun (HARNESS §9.5): a journaled wait, registered rows, a park; woken by `mcp-harness
runs signal`, by `deliver_signal` (a `wake` trigger's path), by `write run:<id>` and by activity; the match rules;
timeouts; two racing deliveries with one winner; cancel while waiting. In-memory MCP client, real SQLite, Monty."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness.addresses import Address
from mcp_harness.harness import Harness
from mcp_harness.runs.signals import deliver_activity, deliver_signal
from mcp_harness.scope import Scope
from mcp_harness.server import build_server
from mcp_harness.spaces import run as run_space
from mcp_harness.store import run_waits
from mcp_harness.store.db import Database
from mcp_harness.verbs.base import VerbContext
from tests.cli.clikit import run as cli
from tests.conftest import call
from tests.runs.waitkit import Clock, install_clock, parked, released, start

pytestmark = pytest.mark.anyio

DOC = "hm://z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK/notes"


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return install_clock(monkeypatch)


@pytest.fixture
async def client(scripted: Harness) -> AsyncIterator[Client]:
    async with Client(build_server(scripted), mode="legacy") as c:
        yield c


@dataclass(frozen=True)
class Event:
    """An activity event as far as a wait matches it (the feed's ActivityEvent has these and more)."""

    type: str
    resource: str
    author: str


def waits_of(h: Harness, run_id: str) -> list[run_waits.WaitRow]:
    with h.db.reading() as conn:
        return run_waits.of_run(conn, run_id)


def signal(h: Harness, run_id: str | None, name: str, payload: Any = None, source: Any = "signal") -> str | None:
    delivered = deliver_signal(
        h.runs, account_id=h.account_id, run_id=run_id, signal=name, payload=payload, source=source
    )
    h.engine.wake()
    return delivered


async def test_a_trigger_delivery_wakes_the_wait_with_the_envelope(client: Client, scripted: Harness) -> None:
    script = "def main(ctx):\n    got = ctx.wait_for_event('approve', label='sign-off')\n    return got\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        await released(scripted, run.id)
        info = run.to_info()["wait"]
        assert info == {"reason": "event", "label": "sign-off", "answerWith": "approve"}
        (row,) = waits_of(scripted, run.id)
        assert row.match == {"signal": "approve"} and row.kind == "signal"
        other = deliver_signal(
            scripted.runs, account_id=scripted.account_id, run_id=None, signal="approve", agent_id="another-agent"
        )
        assert other is None  # a wake trigger of another agent reaches none of this agent's scripts
        assert signal(scripted, None, "approve", {"by": "ada"}, source="trigger") == run.id  # any run of the account
        answer = await started.result()
        assert answer["output"] == {"source": "trigger", "signal": "approve", "payload": {"by": "ada"}}
        entries = scripted.runs.journal(run.id)
        assert [e["kind"] for e in entries] == ["wait", "event"]
        assert entries[0]["key"] == 'wait|{"signal":"approve"}' and entries[1]["waitId"] == entries[0]["waitId"]
        assert waits_of(scripted, run.id) == []


async def test_runs_signal_wakes_the_script_from_another_connection(
    client: Client, scripted: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(scripted.data_dir)
    script = "def main(ctx):\n    return ctx.wait_for_event('go')\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        code, _, err = cli(capsys, "runs", "signal", run.id, "stop", "--data-dir", data)
        assert code == 1 and f"No wait of run {run.id} accepts signal 'stop'; it waits for: 'go'." in err
        assert cli(capsys, "runs", "signal", run.id, "go", "--payload", "{nope", "--data-dir", data)[0] == 2
        assert cli(capsys, "runs", "signal", "no-such-run", "go", "--data-dir", data)[:3:2] == (
            3,
            "mcp-harness: No run no-such-run.\n",
        )
        code, out, _ = cli(
            capsys, "runs", "signal", run.id, "go", "--payload", '{"n": 1}', "--json", "--data-dir", data
        )
        assert code == 0 and json.loads(out)["delivered"] is True
        # No wake: the serving engine finds the requeued run on its next poll, as a `serve` elsewhere would.
        answer = await started.result()
        code, _, err = cli(capsys, "runs", "signal", run.id, "go", "--data-dir", data)
        assert answer["output"] == {"source": "signal", "signal": "go", "payload": {"n": 1}}
        assert code == 1 and "is succeeded, not waiting" in err


async def test_write_run_signals_a_waiting_script_within_scope(client: Client, scripted: Harness) -> None:
    script = "def main(ctx):\n    return ctx.wait_for_event()\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        assert run.to_info()["wait"]["answerWith"] == "answer"
        agent = scripted.agent()
        confined = VerbContext(
            services=scripted,
            agent=agent,
            session_id=None,
            actor="agent",
            scope=Scope(scripted.account_id, agent_id="someone-else"),
        )
        with pytest.raises(Exception, match=f"No run {run.id}"):
            await anyio.to_thread.run_sync(
                run_space.write_run, confined, Address("run", run.id, raw=f"run:{run.id}"), '{"signal": "x"}', {}, False
            )
        bad = await client.call_tool("write", {"address": f"run:{run.id}", "content": '{"payload": 1}'})
        assert bad.is_error and "expects" in bad.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
        got = await call(
            client, "write", {"address": f"run:{run.id}", "content": json.dumps({"signal": "anything", "payload": [1]})}
        )
        assert got["delivered"] is True and got["runId"] == run.id
        answer = await started.result()
        again = await call(client, "write", {"address": f"run:{run.id}", "options": {"signal": "anything"}})
        assert answer["output"] == {"source": "signal", "signal": "anything", "payload": [1]}
        assert again["delivered"] is False and "not waiting" in again["summary"]


async def test_a_timeout_resolves_none_and_its_deadline_is_the_park(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = "def main(ctx):\n    return {'got': ctx.wait_for_event('never', timeout_ms=ctx.minutes(30))}\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        timeout_at = scripted.runs.journal(run.id)[0]["timeoutAt"]
        assert run.not_before == timeout_at and run.to_info()["wait"]["wakeAt"] == timeout_at
        clock.advance(31 * 60_000)
        scripted.engine.wake()
        answer = await started.result()
        assert answer["output"] == {"got": None}
        entries = scripted.runs.journal(run.id)
        assert [e["kind"] for e in entries] == ["wait", "event"] and "delivery" not in entries[1]
        assert signal(scripted, run.id, "never") is None and waits_of(scripted, run.id) == []


async def test_bad_waits_are_refused(client: Client, scripted: Harness) -> None:
    script = """
def main(ctx):
    out = []
    for kwargs in [{"timeout_ms": 0}, {"timeout_ms": "soon"}, {"match": "x"}, {"match": {"colour": "red"}},
                   {"match": {"signal": "a", "author": "b"}}, {"signal": "a", "match": {"signal": "b"}}]:
        try:
            ctx.wait_for_event(**kwargs)
        except RuntimeError as e:
            out.append(str(e).split(":")[0])
    return out
"""
    async with anyio.create_task_group() as tg:
        answer = await start(tg, client, script).result()
        assert answer["output"] == ["invalid-input"] * 6


async def test_match_rules_signal_name_any_signal_and_activity(client: Client, scripted: Harness) -> None:
    script = f"""
def main(ctx):
    named = ctx.wait_for_event("approve")
    anything = ctx.wait_for_event()
    seen = ctx.wait_for_event(match={{"eventType": "comment", "resource": "{DOC}"}})
    return [named["signal"], anything["signal"], seen["source"], seen["payload"]["author"]]
"""
    comment = Event("comment", f"{DOC}?v=bafyreih5ypqbbclv2qfqg6dlrw5ytlcaqjzvgl6yq4j5wfdatxwqqd6vqm", "alice")
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        assert signal(scripted, run.id, "reject") is None  # a named wait takes only its name
        assert deliver_activity(scripted.runs, comment) == []  # ... and never activity
        assert signal(scripted, run.id, "approve") == run.id
        await until_wait(scripted, run.id, "any")
        assert deliver_activity(scripted.runs, comment) == []  # a wait naming nothing takes any signal, no activity
        assert signal(scripted, run.id, "whatever") == run.id
        await until_wait(scripted, run.id, "activity")
        assert signal(scripted, run.id, "approve") is None  # an activity wait takes no signal
        assert deliver_activity(scripted.runs, Event("doc-update", DOC, "alice")) == []  # every field must match
        assert deliver_activity(scripted.runs, Event("comment", DOC + "/other", "alice")) == []
        assert deliver_activity(scripted.runs, comment) == [run.id]  # any version of the document
        scripted.engine.wake()
        answer = await started.result()
        assert answer["output"] == ["approve", "whatever", "activity", "alice"]


async def until_wait(h: Harness, run_id: str, kind: str) -> None:
    from tests.runs.waitkit import until

    def ready() -> bool:
        return h.runs.get(run_id).status == "waiting" and [w.kind for w in waits_of(h, run_id)] == [kind]

    await until(ready, f"run {run_id} waiting on a {kind} wait")


async def test_parallel_waits_all_register_and_resolve_one_by_one(
    client: Client, scripted: Harness, clock: Clock
) -> None:
    script = """
def main(ctx):
    return ctx.parallel([
        lambda: ctx.wait_for_event("a")["signal"],
        lambda: ctx.wait_for_event("b", timeout_ms=ctx.hours(5)),
        lambda: ctx.sleep(ctx.hours(1)),
    ])
"""
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        assert sorted(w.match["signal"] for w in waits_of(scripted, run.id)) == ["a", "b"]
        timer = next(e for e in scripted.runs.journal(run.id) if e["kind"] == "timer")
        assert run.not_before == timer["wakeAt"]  # the earlier of the timer and b's timeout
        assert signal(scripted, run.id, "a") == run.id
        await until_wait(scripted, run.id, "signal")
        assert [w.match for w in waits_of(scripted, run.id)] == [{"signal": "b"}]
        clock.advance(6 * 3_600_000)  # the sleep is over and b times out
        scripted.engine.wake()
        answer = await started.result()
        assert answer["output"] == ["a", None, None]


async def test_two_concurrent_deliveries_to_one_wait_have_one_winner(client: Client, scripted: Harness) -> None:
    script = "def main(ctx):\n    return ctx.wait_for_event('go')['payload']\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        barrier = threading.Barrier(2)
        won: list[str | None] = [None, None]

        def race(i: int) -> None:
            db = Database(scripted.data_dir / "harness.db")  # its own connection, as another process has
            try:
                barrier.wait()
                won[i] = deliver_signal(db, account_id=scripted.account_id, run_id=run.id, signal="go", payload=i)
            finally:
                db.close()

        threads = [threading.Thread(target=race, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            await anyio.to_thread.run_sync(t.join)
        scripted.engine.wake()
        answer = await started.result()
        assert won.count(run.id) == 1 and won.count(None) == 1
        winner = won.index(run.id)
        assert answer["output"] == winner
        assert [e["kind"] for e in scripted.runs.journal(run.id)].count("event") == 1


async def test_cancelling_a_waiting_script_clears_its_waits(client: Client, scripted: Harness) -> None:
    script = "def main(ctx):\n    return ctx.wait_for_event('go', timeout_ms=ctx.hours(1))\n"
    async with anyio.create_task_group() as tg:
        started = start(tg, client, script)
        run = await parked(scripted, "event")
        assert waits_of(scripted, run.id)
        assert await scripted.engine.cancel(run.id)
        answer = await started.result()
        assert answer["status"] == "canceled"
        assert waits_of(scripted, run.id) == [] and signal(scripted, run.id, "go") is None
        assert scripted.runs.get(run.id).not_before is None
