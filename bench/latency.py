"""Per-call latency of `mcp-harness serve` over stdio, against a bare SDK server doing the least possible work.

Why: the harness puts a verb dispatcher, input validation, a SQLite event log (a `tool_call` and a `tool_result`
row per call) and a memory-file read behind every `read`. This measures what that costs a client end to end, over
the same transport and SDK client as the baseline, so the ratio isolates the harness's own overhead.

What: both servers are spawned once as stdio subprocesses with the SDK `Client`. The bare one (`bare_server.py`)
answers `echo {"text": "hi"}`; the harness answers `read {"address": "~/memory/bench.txt"}` on a file written before
timing starts, in a fresh temporary data dir. After a warm-up, N sequential calls are made to each, rotating
between the servers in blocks so that machine noise lands on all alike. Prints p50 and p99 for each, their ratios,
and whether the p50 ratio meets the target (harness / bare <= 1.3).

The harness serves stdio without worker threads (see `serve_stdio`), which the SDK's transport does not. So that
the headline ratio cannot hide the harness's own cost behind that transport gain, a third server — the same bare
echo over the harness's transport — is measured too, and the difference is printed as the harness's own cost.

Run: `.venv/bin/python bench/latency.py [--n 1000] [--blocks 10] [--warmup 50] [--check]`. With `--check` it exits 1
if the target is missed (by default it exits 0, so `make bench` goes on to `startup.py`).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

BARE_SERVER = Path(__file__).with_name("bare_server.py")
BENCH_ADDRESS = "~/memory/bench.txt"
BENCH_CONTENT = "hello"
P50_TARGET = 1.3

Call = Callable[[], Awaitable[None]]


def bare_params(*flags: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(BARE_SERVER), *flags])


def harness_params(data_dir: Path) -> StdioServerParameters:
    args = ["-m", "mcp_harness", "serve", "--data-dir", str(data_dir)]
    return StdioServerParameters(command=sys.executable, args=args)


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (`q` in 0..100) of non-empty `samples`."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def block_sizes(n: int, blocks: int) -> list[int]:
    """`n` split into `blocks` near-equal parts (empty parts dropped)."""
    base, extra = divmod(n, blocks)
    return [size for i in range(blocks) if (size := base + (1 if i < extra else 0)) > 0]


async def timed(call: Call, count: int, into: list[float]) -> None:
    """Make `count` sequential calls, appending each one's wall time in milliseconds to `into`."""
    for _ in range(count):
        start = time.perf_counter_ns()
        await call()
        into.append((time.perf_counter_ns() - start) / 1e6)


def _text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def run(n: int, blocks: int, warmup: int) -> bool:
    with tempfile.TemporaryDirectory(prefix="mcp-harness-bench-") as tmp:
        async with (
            Client(bare_params()) as bare,
            Client(bare_params("--harness-transport")) as bare_pipe,
            Client(harness_params(Path(tmp))) as harness,
        ):
            written = await harness.call_tool("write", {"address": BENCH_ADDRESS, "content": BENCH_CONTENT})
            if written.is_error:
                raise SystemExit(f"harness write failed: {_text_of(written)}")

            async def call_bare() -> None:
                await bare.call_tool("echo", {"text": "hi"})

            async def call_bare_pipe() -> None:
                await bare_pipe.call_tool("echo", {"text": "hi"})

            async def call_harness() -> None:
                result = await harness.call_tool("read", {"address": BENCH_ADDRESS})
                if result.is_error:
                    raise SystemExit(f"harness read failed: {_text_of(result)}")

            first = await harness.call_tool("read", {"address": BENCH_ADDRESS})
            if first.is_error or _text_of(first) != BENCH_CONTENT:
                raise SystemExit(f"harness read returned {_text_of(first)!r}, expected {BENCH_CONTENT!r}")
            samples: dict[str, list[float]] = {"bare": [], "bare_pipe": [], "harness": []}
            calls: dict[str, Call] = {"bare": call_bare, "bare_pipe": call_bare_pipe, "harness": call_harness}
            discard: list[float] = []
            for call in calls.values():
                await timed(call, warmup, discard)
            order = list(calls)
            for i, size in enumerate(block_sizes(n, blocks)):
                # Rotate which server goes first, so none always runs right after another's burst.
                for name in order[i % 3 :] + order[: i % 3]:
                    await timed(calls[name], size, samples[name])

    b50, b99 = percentile(samples["bare"], 50), percentile(samples["bare"], 99)
    p50, p99 = percentile(samples["bare_pipe"], 50), percentile(samples["bare_pipe"], 99)
    h50, h99 = percentile(samples["harness"], 50), percentile(samples["harness"], 99)
    met = h50 / b50 <= P50_TARGET
    n_blocks = len(block_sizes(n, blocks))
    print(f"calls: {len(samples['bare'])} per server after {warmup} warm-up, in {n_blocks} rotating blocks")
    print(f"bare    echo  p50 {b50:7.3f} ms   p99 {b99:7.3f} ms   (SDK stdio transport: the baseline)")
    print(f"bare    echo  p50 {p50:7.3f} ms   p99 {p99:7.3f} ms   (the harness's stdio transport)")
    print(f"harness read  p50 {h50:7.3f} ms   p99 {h99:7.3f} ms")
    print(f"ratio (harness / bare)  p50 {h50 / b50:.2f}   p99 {h99 / b99:.2f}")
    print(
        f"harness's own cost per call, same transport: p50 +{h50 - p50:.3f} ms "
        f"(ratio {h50 / p50:.2f} against an echo on that transport)"
    )
    print(f"p50 target <= {P50_TARGET}: {'met' if met else 'MISSED'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=1000, help="timed calls per server (default 1000)")
    parser.add_argument("--blocks", type=int, default=10, help="alternating blocks of calls (default 10)")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per server first (default 50)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args()
    if args.n < 1 or args.blocks < 1 or args.warmup < 0:
        parser.error("--n and --blocks must be at least 1, --warmup at least 0")
    met = anyio.run(run, args.n, args.blocks, args.warmup)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
