"""Per-call cost against history (issue 15 points 1 and 3): a session of 1k / 10k / 100k events, an account of
1k / 10k / 100k sessions.

Why: a daily user's standing session collects every call for months. What a call needs from the past — answered
calls, promotions, owed results — is kept as indexed state (store/open_calls.py, store/touched.py), and thread search
is an FTS5 index (store/search.py), so none of these should grow with history. Each figure is printed as a ratio to
its smallest size, measured in the same run.

What, for each size, with a fresh harness and the SDK's in-memory `Client` bound to the big session:
- `call` (an async verb: `call {tool: "nope"}`, logged first, answered with the listing), `tools/list`, and
  `delegate` (a scripted child that answers at once): the median of R calls each, interleaved. Target: ≤ 1.5× at the
  largest size.
- cold start: `mcp-harness serve --session <id>` over stdio, spawn to `tools/list`, on the big session against an
  empty one in the same data dir, interleaved; and the server's RSS after that `tools/list` (from /proc). Targets:
  ≤ 1.2×, and within 20 MiB of the empty session's.
- thread search: `read thread: {query}` for a word in one conversation among N (each session has a title and a few
  messages), median of R. Target: ≤ 2× at the largest size.

History is written through `SessionStore.append_many` (the real append path, indexes included) in batches of 1,000
events per transaction: tool_call/tool_result pairs of `read ~/memory/…` with a message every tenth event.

Run: `.venv/bin/python bench/scale_calls.py [--sizes 1000,10000,100000] [--rounds 15] [--only call|search|cold]`;
exits 1 when a target is missed (about three minutes at the default sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server

CALL_TARGET = 1.5
COLD_TARGET = 1.2
RSS_TARGET_MIB = 20.0
SEARCH_TARGET = 2.0
SCRIPT = {"rules": [{"when": "Answer at once", "turns": [{"text": "done"}]}]}


def _harness(tmp: Path) -> Harness:
    script = tmp / "script.json"
    script.write_text(json.dumps(SCRIPT))
    providers = {"scripted": {"type": "scripted", "file": str(script)}}
    return Harness(load_settings(data_dir=tmp / "data", providers=providers))


def fill_session(harness: Harness, session_id: str, n: int) -> None:
    """n events of answered `read` calls, a user message every tenth."""
    batch: list[tuple[dict[str, Any], Any]] = []
    for i in range(n):
        if i % 10 == 9:
            batch.append(({"type": "message", "role": "user", "content": f"note {i} about the work"}, "user"))
        elif i % 2 == 0:
            batch.append(
                ({"type": "tool_call", "id": f"c{i}", "name": "read", "input": {"address": f"~/memory/{i}"}}, "agent")
            )
        else:
            batch.append(
                (
                    {"type": "tool_result", "toolCallId": f"c{i - 1}", "name": "read", "output": {"summary": "ok"}},
                    "agent",
                )
            )
        if len(batch) == 1000:
            harness.sessions.append_many(session_id, batch)
            batch = []
    if batch:
        harness.sessions.append_many(session_id, batch)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def calls_at(n: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        harness = _harness(Path(tmp))
        try:
            agent = harness.agent()
            session = harness.sessions.create(harness.account_id, agent.id, title="long")
            fill_session(harness, session.id, n)
            times: dict[str, list[float]] = {"call": [], "tools/list": [], "delegate": []}
            async with Client(build_server(harness, session_id=session.id), mode="legacy") as c:
                for _ in range(2):  # warm: the sandbox probe, the provider, caches
                    await c.call_tool("call", {"tool": "nope"})
                    await c.call_tool("delegate", {"brief": "Answer at once"})
                for _ in range(rounds):
                    start = time.perf_counter()
                    await c.call_tool("call", {"tool": "nope"})
                    times["call"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    await c.list_tools()
                    times["tools/list"].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    result = await c.call_tool("delegate", {"brief": "Answer at once"})
                    times["delegate"].append(time.perf_counter() - start)
                    if result.is_error:
                        raise SystemExit(f"delegate failed: {result.content}")
            return {k: median_ms(v) for k, v in times.items()}
        finally:
            harness.close()


def _server_rss_mib(marker: str) -> float:
    """The RSS of the `serve` process whose command line names `marker` (its data dir)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker in cmdline and " serve " in cmdline:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            continue
    return float("nan")


async def cold_start(data_dir: Path, session_id: str) -> tuple[float, float]:
    args = ["-m", "mcp_harness", "serve", "--data-dir", str(data_dir), "--session", session_id]
    params = StdioServerParameters(command=sys.executable, args=args)
    start = time.perf_counter()
    async with Client(params) as c:
        await c.list_tools()
        elapsed = time.perf_counter() - start
        rss = _server_rss_mib(str(data_dir))
    return elapsed * 1000, rss


async def cold_at(n: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        harness = _harness(Path(tmp))
        agent = harness.agent()
        big = harness.sessions.create(harness.account_id, agent.id, title="long")
        empty = harness.sessions.create(harness.account_id, agent.id, title="empty")
        fill_session(harness, big.id, n)
        data_dir = harness.settings.data_dir
        harness.close()
        await cold_start(data_dir, empty.id)  # untimed: page cache, bytecode
        figures: dict[str, list[float]] = {"empty ms": [], "big ms": [], "empty MiB": [], "big MiB": []}
        for i in range(rounds):
            for which, sid in (("empty", empty.id), ("big", big.id))[:: 1 if i % 2 else -1]:
                ms, mib = await cold_start(data_dir, sid)
                figures[f"{which} ms"].append(ms)
                figures[f"{which} MiB"].append(mib)
        return {k: statistics.median(v) for k, v in figures.items()}


def fill_account(harness: Harness, n: int) -> str:
    """n sessions with a title and three messages each; one of them mentions the needle. Returns its id."""
    agent = harness.agent()
    needle = ""
    for start in range(0, n, 1000):
        with harness.db.transaction():
            for i in range(start, min(n, start + 1000)):
                s = harness.sessions.create(harness.account_id, agent.id, title=f"Conversation {i}")
                words = "the albatross budget" if i == n // 2 else f"weekly sync number {i}"
                harness.sessions.append_many(
                    s.id, [({"type": "message", "role": "user", "content": f"{words} {j}"}, "user") for j in range(3)]
                )
                if i == n // 2:
                    needle = s.id
    return needle


async def search_at(n: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        harness = _harness(Path(tmp))
        try:
            needle = fill_account(harness, n)
            times: list[float] = []
            async with Client(build_server(harness), mode="legacy") as c:
                for i in range(rounds + 2):
                    start = time.perf_counter()
                    result = await c.call_tool("read", {"address": "thread:", "options": {"query": "albatross"}})
                    if i >= 2:
                        times.append(time.perf_counter() - start)
                    found = [t["thread"] for t in (result.structured_content or {}).get("threads", [])]
                    if found != [f"thread:{needle}"]:
                        raise SystemExit(f"search at {n}: expected the one conversation, got {found}")
            return {"thread: search": median_ms(times)}
        finally:
            harness.close()


def report(title: str, sizes: list[int], rows: dict[int, dict[str, float]], targets: dict[str, float]) -> bool:
    ok = True
    print(f"\n{title}")
    first = rows[sizes[0]]
    for key in first:
        line = f"  {key:<16}" + "".join(f" {sizes[i]:>7,}: {rows[s][key]:8.2f}" for i, s in enumerate(sizes))
        ratio = rows[sizes[-1]][key] / first[key] if first[key] else float("nan")
        target = targets.get(key)
        verdict = "" if target is None else (" ok" if ratio <= target else f" MISSED (target ≤ {target})")
        ok &= target is None or ratio <= target
        print(f"{line}   ×{ratio:.2f} largest/smallest{verdict}")
    return ok


async def main(sizes: list[int], rounds: int, only: str | None) -> bool:
    ok = True
    if only in (None, "call"):
        rows = {n: await calls_at(n, rounds) for n in sizes}
        ok &= report(
            "Per call against session history (ms, median)", sizes, rows, dict.fromkeys(rows[sizes[0]], CALL_TARGET)
        )
    if only in (None, "cold"):
        big = sizes[-1]
        cold = await cold_at(big, max(5, rounds // 2))
        ratio = cold["big ms"] / cold["empty ms"]
        extra = cold["big MiB"] - cold["empty MiB"]
        print(f"\nCold start on a {big:,}-event session against an empty one (stdio, spawn to tools/list)")
        print(
            f"  empty {cold['empty ms']:.0f} ms, {cold['empty MiB']:.1f} MiB; big {cold['big ms']:.0f} ms, "
            f"{cold['big MiB']:.1f} MiB"
        )
        cold_ok, rss_ok = ratio <= COLD_TARGET, extra <= RSS_TARGET_MIB
        print(
            f"  ×{ratio:.2f} {'ok' if cold_ok else f'MISSED (target ≤ {COLD_TARGET})'}; "
            f"RSS +{extra:.1f} MiB {'ok' if rss_ok else f'MISSED (target ≤ {RSS_TARGET_MIB} MiB)'}"
        )
        ok &= cold_ok and rss_ok
    if only in (None, "search"):
        rows = {n: await search_at(n, rounds) for n in sizes}
        ok &= report(
            "Thread search against sessions in the account (ms, median)", sizes, rows, {"thread: search": SEARCH_TARGET}
        )
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--only", choices=["call", "cold", "search"])
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    sys.exit(0 if anyio.run(main, sizes, args.rounds, args.only) else 1)
