"""Start-up time of `mcp-harness serve` over stdio, against a bare SDK server: spawn to `tools/list` answered.

Why: a stdio MCP server is started by its client, often once per conversation, so the time before its first answer
is paid by every user. The bare server (`bare_server.py`) imports only the SDK; the difference is the harness's
imports, settings, database open and migration check, and server construction.

What: each run times entering the SDK `Client` for a freshly spawned subprocess (spawn, interpreter start, handshake)
through the `list_tools` result; closing the client is not timed. R runs per server, interleaved and alternating
which goes first, after one untimed run of each (which also creates the harness's data dir and default agent).
Prints the median of each and their ratio, and whether it meets the target (harness / bare <= 1.2).

The harness reuses one temporary data dir across runs, as a user's server reuses theirs: timed runs open an
existing, migrated database and find the default agent rather than creating them.

Run: `.venv/bin/python bench/startup.py [--runs 15] [--check]`. With `--check` it exits 1 if the target is missed
(by default it exits 0, like `latency.py`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

BARE_SERVER = Path(__file__).with_name("bare_server.py")
MEDIAN_TARGET = 1.2


def bare_params() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(BARE_SERVER)])


def harness_params(data_dir: Path) -> StdioServerParameters:
    args = ["-m", "mcp_harness", "serve", "--data-dir", str(data_dir)]
    return StdioServerParameters(command=sys.executable, args=args)


async def time_to_tools(params: StdioServerParameters, expect: str) -> float:
    """Milliseconds from entering the client to the `tools/list` result; checks `expect` is among the tools."""
    start = time.perf_counter_ns()
    async with Client(params) as client:
        listed = await client.list_tools()
        elapsed = (time.perf_counter_ns() - start) / 1e6
    names = [tool.name for tool in listed.tools]
    if expect not in names:
        raise SystemExit(f"{params.args}: tools/list lacks {expect!r}: {names}")
    return elapsed


async def run(runs: int) -> bool:
    with tempfile.TemporaryDirectory(prefix="mcp-harness-bench-") as tmp:
        bare, harness = bare_params(), harness_params(Path(tmp))
        await time_to_tools(bare, "echo")
        await time_to_tools(harness, "read")
        bare_ms: list[float] = []
        harness_ms: list[float] = []
        for i in range(runs):
            pair = [(bare, "echo", bare_ms), (harness, "read", harness_ms)]
            for params, expect, into in pair if i % 2 == 0 else reversed(pair):
                into.append(await time_to_tools(params, expect))

    bare_median, harness_median = statistics.median(bare_ms), statistics.median(harness_ms)
    ratio = harness_median / bare_median
    met = ratio <= MEDIAN_TARGET
    print(f"runs: {runs} per server, interleaved, after one untimed run each")
    for name, median, samples in (("bare   ", bare_median, bare_ms), ("harness", harness_median, harness_ms)):
        print(f"{name}  spawn -> tools/list  median {median:7.1f} ms  (min {min(samples):.1f}, max {max(samples):.1f})")
    print(f"ratio (harness / bare)  {ratio:.2f}")
    print(f"median target <= {MEDIAN_TARGET}: {'met' if met else 'MISSED'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per server (default 15)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    met = anyio.run(run, args.runs)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
