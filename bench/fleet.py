"""Several replicas on one PostgreSQL store (issue 21): what the shared store costs, against one SQLite replica.

Why: `[store] url = "postgresql://…"` lets N `serve` replicas act as one harness. Every logged verb call then pays a
round trip to the database instead of a local SQLite commit, and every run claim competes with the other replicas'.
On a 2-core machine the replicas, the clients and PostgreSQL share the same two cores, so these figures measure
overhead, not scale: two replicas cannot be faster than one here, and the bench says so rather than pretend.

What, in one run:
- throughput: C concurrent MCP clients over Streamable HTTP, each making short `read ~/memory/bench.md` calls in a
  loop for T seconds (each call is two logged commits), against (a) one `serve --http` on SQLite (the baseline),
  (b) one on PostgreSQL, (c) two on the same PostgreSQL and data root, the clients split between them. Prints
  calls/s and the ratio of (b) and (c) to (a).
- claim latency: N queued runs claimed by K threads, each its own owner (a replica's engine), on PostgreSQL and on
  SQLite, K = 1 and 4: p50/p99 of one `claim_next` and the ratio of K = 4 to K = 1 on each backend.

The PostgreSQL cluster is a throw-away one (tests/store/pgkit.py: initdb in a temp dir, Unix socket only).

Run: `.venv/bin/python bench/fleet.py [--clients 8] [--seconds 5] [--runs 400]` (about a minute).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_harness.config import load_settings  # noqa: E402
from mcp_harness.harness import Harness  # noqa: E402
from tests.hypermedia.nodekit import Node, config_file, serve_http  # noqa: E402
from tests.store import pgkit  # noqa: E402

TOKEN = "bench-fleet-token"
ADDRESS = "~/memory/bench.md"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def store_config(path: Path, url: str | None) -> Path:
    return config_file(path, f'[store]\nurl = "{url}"\n' if url else "")


async def throughput(nodes: list[Node], clients: int, seconds: float) -> float:
    """Calls per second of `clients` loops over `nodes` (round robin) for `seconds`, after a warm-up call each."""
    done = 0
    async with AsyncExitStack() as stack:
        sessions: list[Client] = []
        for i in range(clients):
            node = nodes[i % len(nodes)]
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
            transport = streamable_http_client(f"{node.base}/mcp", http_client=http)
            client = await stack.enter_async_context(Client(transport, mode="legacy"))  # pyright: ignore[reportArgumentType]
            await client.call_tool("read", {"address": ADDRESS})
            sessions.append(client)
        deadline = time.perf_counter() + seconds

        async def loop(client: Client) -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                result = await client.call_tool("read", {"address": ADDRESS})
                if result.is_error:
                    raise RuntimeError(f"read failed: {result.content}")
                done += 1

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for client in sessions:
                tg.start_soon(loop, client)
        elapsed = time.perf_counter() - start
    return done / elapsed


async def measure_throughput(root: Path, cluster: pgkit.Cluster, clients: int, seconds: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    for label, backend, replicas in (("sqlite x1", "sqlite", 1), ("postgres x1", "pg", 1), ("postgres x2", "pg", 2)):
        # A database per case: a store is bound to one data root (its marker), and each case has its own.
        store_url = cluster.new_database() if backend == "pg" else None
        case = root / label.replace(" ", "-")
        data = case / "data"
        data.mkdir(parents=True)
        (data / "memory").mkdir(exist_ok=True)
        config = store_config(case / "config.toml", store_url)
        async with AsyncExitStack() as stack:
            nodes = [await stack.enter_async_context(serve_http(data, config, TOKEN)) for _ in range(replicas)]
            await nodes[0].call("write", {"address": ADDRESS, "content": "hello"})
            figures[label] = await throughput(nodes, clients, seconds)
        print(f"  {label:12} {figures[label]:8.1f} calls/s", flush=True)
    return figures


def claim_latency(harness: Harness, runs: int, threads: int) -> list[float]:
    """Per-claim seconds when `threads` owners drain `runs` queued runs at once."""
    agent = harness.agent()
    for i in range(runs):
        harness.runs.enqueue(account_id=agent.account_id, title=f"bench {i}", origin="user", agent_id=agent.id)
    samples: list[float] = []
    lock = threading.Lock()

    def drain(owner: str) -> None:
        mine: list[float] = []
        while True:
            start = time.perf_counter()
            run = harness.runs.claim_next(owner, kinds=["agent"])
            mine.append(time.perf_counter() - start)
            if run is None:
                break
        with lock:
            samples.extend(mine[:-1])

    workers = [threading.Thread(target=drain, args=(f"bench-owner-{t}",)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if len(samples) != runs:
        raise RuntimeError(f"{len(samples)} claims for {runs} runs: a run was claimed twice or lost")
    return samples


def measure_claims(root: Path, cluster: pgkit.Cluster, runs: int) -> None:
    for backend in ("sqlite", "postgres"):
        p50: dict[int, float] = {}
        for threads in (1, 4):
            case = root / f"claims-{backend}-{threads}"
            url = cluster.new_database() if backend == "postgres" else None
            harness = Harness(load_settings(store_config(case.with_suffix(".toml"), url), data_dir=case))
            try:
                samples = claim_latency(harness, runs, threads)
            finally:
                harness.close()
            p50[threads] = statistics.median(samples)
            print(
                f"  {backend:8} K={threads}  p50 {p50[threads] * 1000:6.2f} ms  p99 "
                f"{percentile(samples, 99) * 1000:6.2f} ms",
                flush=True,
            )
        print(f"  {backend:8} contention ratio (K=4 / K=1, p50): {p50[4] / p50[1]:.2f}", flush=True)


async def main_async(args: argparse.Namespace) -> None:
    cluster = pgkit.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
            root = Path(tmp)
            print(f"throughput: {args.clients} clients, {args.seconds:g} s each (2 cores: overhead, not scale)")
            figures = await measure_throughput(root, cluster, args.clients, args.seconds)
            base = figures["sqlite x1"]
            for label in ("postgres x1", "postgres x2"):
                print(f"  ratio {label} / sqlite x1: {figures[label] / base:.2f}")
            print(f"claim latency: {args.runs} runs")
            measure_claims(root, cluster, args.runs)
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=400)
    anyio.run(main_async, parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
