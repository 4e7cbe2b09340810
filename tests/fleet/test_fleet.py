"""Two replicas act as one harness (issue 21): real `serve --http` processes on one PostgreSQL database and one data
root, MCP clients on both, a delegate tree and schedule triggers, and `kill -9` of the replica holding live runs.

The scene, in one module-scoped fixture (the processes take seconds to start):
- the triggers are due before either replica starts, so both schedulers race for every occurrence;
- a client on replica A subscribes to its conversation's plan and a client on replica B, in the same conversation,
  changes the plan: A's client is told (the change bus crosses replicas);
- a client on A delegates a coordinator that delegates three leaves; each leaf appends its name to `ledger.txt` (a
  sandboxed shell call: the side effect) and then waits for a slow model reply. Runs land on either replica. While
  the leaves wait, the replica holding a running leaf is killed with -9; the other one takes its runs over.
Then every run is terminal and succeeded, each side effect happened once, each occurrence fired once, and every logged
call in every session has exactly one result.
"""

from __future__ import annotations

import json
import warnings
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, LiteralString

import anyio
import cbor2
import httpx2
import mcp_types as types
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg.rows import dict_row

from tests.conftest import call
from tests.crash.crashkit import answer_problems, ledger, ledger_tree_rules, require_sandbox, until
from tests.hypermedia.nodekit import Node, serve_http
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the fixture)

TOKEN = "fleet-token"
LEAVES = 3
LEAF_DELAY_MS = 4000
"""The leaves' slow second reply: the window in which a replica is killed (asked again after the takeover)."""
TRIGGERS = 12
COORDINATOR = "Coordinate the fleet leaves"
STEPS = [{"id": "a", "label": "first", "status": "pending"}]


def leaf(i: int) -> str:
    return f"Fleet leaf {i}"


def rules() -> list[dict[str, Any]]:
    leaves = [leaf(i) for i in range(LEAVES)]
    tree = ledger_tree_rules(COORDINATOR, leaves, delay_ms=LEAF_DELAY_MS, final_text="all leaves came back")
    return [*tree, {"turns": [{"text": "handled"}]}]


def query(url: str, sql: LiteralString, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    with psycopg.connect(url) as conn:
        return conn.cursor(row_factory=dict_row).execute(sql, args).fetchall()


def events(url: str) -> dict[str, list[dict[str, Any]]]:
    by_session: dict[str, list[dict[str, Any]]] = {r["id"]: [] for r in query(url, "SELECT id FROM sessions")}
    for row in query(url, "SELECT session_id, seq, id, actor, event_cbor FROM session_events ORDER BY seq"):
        payload = cbor2.loads(row["event_cbor"])
        by_session.setdefault(row["session_id"], []).append({**payload, "seq": row["seq"], "eventId": row["id"]})
    return by_session


def seed(url: str, data_dir: Path, config: Path) -> str:
    """The due triggers and the conversation both clients join; returns its id. Migrates the empty database."""
    import time

    from mcp_harness.config import load_settings
    from mcp_harness.harness import Harness
    from mcp_harness.triggers.schedule import next_due_at

    harness = Harness(load_settings(config, data_dir=data_dir))
    try:
        agent = harness.agent()
        now = int(time.time() * 1000)
        for i in range(TRIGGERS):
            schedule = {"kind": "once", "runAt": now - 1000 - i}
            harness.triggers.save(
                account_id=agent.account_id,
                agent_id=agent.id,
                name=f"t{i:02}",
                enabled=True,
                source={"type": "schedule", "schedule": schedule},
                prompt=f"Fleet trigger {i}",
                continuation=None,
                next_due=lambda c, last, s=schedule: next_due_at(s, created_at=c, last_fired_at=last),
                now=now - 60_000,
            )
        session = harness.sessions.create(agent.account_id, agent.id, kind="conversation", title="Fleet")
        return session.id
    finally:
        harness.close()


class Updates:
    """`notifications/resources/updated` URIs a handshake-era client hears."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self.arrived.set()


async def client(stack: AsyncExitStack, node: Node, session_id: str, updates: Updates | None = None) -> Client:
    """A handshake-era MCP client of `node`, bound to the conversation `session_id`."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    transport = streamable_http_client(f"{node.base}/mcp/sessions/{session_id}", http_client=http)
    return await stack.enter_async_context(
        Client(transport, mode="legacy", message_handler=updates)  # pyright: ignore[reportArgumentType]
    )


@dataclass(frozen=True)
class Aftermath:
    notified: list[str]
    victim_held: list[str]
    runs: list[dict[str, Any]]
    firings: list[dict[str, Any]]
    log: dict[str, list[dict[str, Any]]]
    ledger: list[str]
    victim: str
    """Which replica was killed: "a" (the delegating client's) or "b"."""
    answer: list[str]
    """The delegate call's answer when its replica (A) lived; empty when A was the one killed."""
    open_calls: int


def side_effects_done(url: str) -> bool:
    leaves = query(url, "SELECT session_id FROM runs WHERE parent_run_id IS NOT NULL AND trigger_firing_id IS NULL")
    if len(leaves) < LEAVES:
        return False
    log = events(url)
    return all(
        any(e["type"] == "tool_result" and e.get("name") == "call" for e in log.get(r["session_id"], []))
        for r in leaves
    )


async def play(tmp: Path, cluster: Cluster) -> Aftermath:
    url = cluster.new_database()
    data_dir = tmp / "data"
    script = tmp / "script.json"
    script.write_text(json.dumps({"rules": rules()}))
    config = tmp / "config.toml"
    config.write_text(
        f'log_level = "INFO"\n\n[providers.scripted]\ntype = "scripted"\nfile = {json.dumps(str(script))}\n\n'
        f"[store]\nurl = {json.dumps(url)}\n\n[triggers]\npoll_interval_s = 0.05\n\n[runs]\nheartbeat_s = 1\n"
    )
    session_id = seed(url, data_dir, config)
    updates = Updates()
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(serve_http(data_dir, config, TOKEN))
        b = await stack.enter_async_context(serve_http(data_dir, config, TOKEN))
        log = a.log

        # The change bus: a subscription on A hears a plan change made through B.
        on_a = await client(stack, a, session_id, updates)
        await call(on_a, "plan", {"steps": STEPS})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated only as of 2026-07-28, which this client does not speak
            await on_a.subscribe_resource("harness://plan")
        on_b = await client(stack, b, session_id)
        await call(on_b, "plan", {"steps": [{**STEPS[0], "status": "done"}]})
        with anyio.fail_after(20):
            while "harness://plan" not in updates.uris:
                updates.arrived = anyio.Event()
                await updates.arrived.wait()

        # The delegate tree, started through A; the kill lands while the leaves wait on their slow reply.
        answer: list[str] = []

        async def delegate() -> None:
            try:
                result = await on_a.call_tool("delegate", {"brief": COORDINATOR})
            except Exception:  # noqa: BLE001 - the connection dies with replica A when A is the victim
                return
            answer.extend(c.text for c in result.content if isinstance(c, types.TextContent))

        def settled() -> bool:
            rows = query(url, "SELECT status FROM runs")
            terminal = all(r["status"] in ("succeeded", "failed", "canceled") for r in rows)
            return len(rows) >= LEAVES + 1 + TRIGGERS and terminal

        victim_held: list[str] = []
        victim = b
        async with anyio.create_task_group() as tg:
            tg.start_soon(delegate)
            await until(lambda: side_effects_done(url), "the leaves' side effects", 60, log)
            pids = {r["id"]: r["pid"] for r in query(url, "SELECT id, pid FROM instances")}
            held = [r["lease_owner"] for r in query(url, "SELECT lease_owner FROM runs WHERE status = 'running'")]
            owner = next(o for o in held if o in pids)
            victim, survivor = (a, b) if pids[owner] == a.proc.pid else (b, a)
            victim_held += [o for o in held if o == owner]
            await victim.kill()
            await until(settled, "every run terminal on the surviving replica", 120, survivor.log)
            if victim is a:
                tg.cancel_scope.cancel()  # its client's call died with it; nothing is left to hear
            else:  # the client's call is answered by A, which lived, once the tree B held is done
                with anyio.fail_after(60):
                    while not answer:
                        await anyio.sleep(0.05)
        result = Aftermath(
            notified=list(updates.uris),
            victim_held=victim_held,
            runs=query(url, "SELECT * FROM runs"),
            firings=query(url, "SELECT * FROM trigger_firings"),
            log=events(url),
            ledger=ledger(data_dir),
            victim="a" if victim is a else "b",
            answer=answer,
            open_calls=int(query(url, "SELECT COUNT(*) AS n FROM open_calls")[0]["n"]),
        )
    return result


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, pg_cluster: Cluster) -> Aftermath:
    """The scene, played once for every test of this module."""
    tmp = tmp_path_factory.mktemp("fleet")
    require_sandbox(tmp)
    return anyio.run(play, tmp, pg_cluster)


def test_a_subscription_on_one_replica_hears_a_change_made_through_the_other(fleet: Aftermath) -> None:
    assert "harness://plan" in fleet.notified


def test_every_run_succeeds_after_the_kill(fleet: Aftermath) -> None:
    assert fleet.victim_held, "the killed replica held a running leaf"
    assert {r["status"] for r in fleet.runs} == {"succeeded"}, [(r["title"], r["status"]) for r in fleet.runs]


def test_the_client_of_the_replica_that_lived_is_answered(fleet: Aftermath) -> None:
    if fleet.victim == "a":  # the client's connection died with its replica: no answer, and no hang
        assert fleet.answer == []
    else:  # A lived: its client's delegate call got the coordinator's result, though B ran the leaves
        assert "all leaves came back" in "".join(fleet.answer)


def test_each_side_effect_happened_once(fleet: Aftermath) -> None:
    assert sorted(fleet.ledger) == [f"leaf-{i}" for i in range(LEAVES)]


def test_each_occurrence_fired_once_in_the_whole_fleet(fleet: Aftermath) -> None:
    per_trigger: dict[str, int] = {}
    for firing in fleet.firings:
        per_trigger[firing["trigger_id"]] = per_trigger.get(firing["trigger_id"], 0) + 1
    assert len(per_trigger) == TRIGGERS and set(per_trigger.values()) == {1}
    fired_runs = [r for r in fleet.runs if r["trigger_firing_id"] is not None]
    assert len(fired_runs) == TRIGGERS


def test_every_logged_call_has_exactly_one_result(fleet: Aftermath) -> None:
    assert answer_problems(fleet.log) == []
    assert fleet.open_calls == 0
