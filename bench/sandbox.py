"""Latency of code execution in the bubblewrap sandbox, against a bare `python3 -c 'print(1)'` spawn.

Why: every `execute` call and every authored lambda starts a fresh sandbox (namespaces, mounts, a pids cgroup,
limits) and snapshots the agent's memory before and after. This measures what that costs end to end over MCP,
next to the floor no sandbox can beat: spawning the same system interpreter directly, measured in the same run.

What (default, MCP mode): `mcp-harness serve` is spawned over stdio with the SDK `Client` in a fresh temporary data
dir. It authors a lambda first (`write ~/tools/bench_echo`), then times, in rotating blocks after a warm-up:
`call {tool: "execute", input: {runtime: "python", code: "print(1)"}}`, `call {tool: "bench_echo", input: {x: 1}}`,
and a bare spawn of the system Python. `--direct` times `Sandbox.run("python", "print(1)")` in this process
instead of going through the server (no MCP, no lambda), which isolates the sandbox itself.

Prints p50 and p99 of each, the overhead ratio against the bare spawn, and whether execute's p50 meets the target
(<= 80 ms). Run: `.venv/bin/python bench/sandbox.py [--n 100] [--warmup 5] [--direct] [--check]`; with `--check`
it exits 1 if the target is missed.
"""

from __future__ import annotations

import argparse
import json
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

from mcp_harness.config import SandboxSettings
from mcp_harness.sandbox import Sandbox

P50_TARGET_MS = 80.0
BLOCKS = 10
ECHO_TOOL = {"description": "Echo.", "source": "def main(input):\n    return input\n", "runtime": "python"}

Call = Callable[[], Awaitable[None]]


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (`q` in 0..100) of non-empty `samples`."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def block_sizes(n: int, blocks: int) -> list[int]:
    base, extra = divmod(n, blocks)
    return [size for i in range(blocks) if (size := base + (1 if i < extra else 0)) > 0]


async def measure(calls: dict[str, Call], n: int, warmup: int) -> dict[str, list[float]]:
    """Warm each call up, then time `n` of each in rotating blocks so that machine noise lands on all alike."""
    for call in calls.values():
        for _ in range(warmup):
            await call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for i, size in enumerate(block_sizes(n, BLOCKS)):
        shift = i % len(order)
        for name in order[shift:] + order[:shift]:
            for _ in range(size):
                start = time.perf_counter_ns()
                await calls[name]()
                samples[name].append((time.perf_counter_ns() - start) / 1e6)
    return samples


def bare_spawn(python: str) -> Call:
    async def call() -> None:
        done = await anyio.run_process([python, "-c", "print(1)"])
        if done.stdout != b"1\n":
            raise SystemExit(f"bare {python} printed {done.stdout!r}")

    return call


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def mcp_calls(client: Client) -> dict[str, Call]:
    """The execute and lambda calls, after checking each once (and authoring the lambda)."""
    execute_args = {"tool": "execute", "input": {"runtime": "python", "code": "print(1)"}}
    lambda_args = {"tool": "bench_echo", "input": {"x": 1}}
    written = await client.call_tool("write", {"address": "~/tools/bench_echo", "content": json.dumps(ECHO_TOOL)})
    if written.is_error:
        raise SystemExit(f"authoring the lambda failed: {_text(written)}")
    first = await client.call_tool("call", execute_args)
    data = first.structured_content or {}
    if first.is_error or data.get("stdout") != "1\n":
        raise SystemExit(f"call execute did not run print(1) (try --direct): {_text(first)[:500]}")
    echo = await client.call_tool("call", lambda_args)
    if echo.is_error or (echo.structured_content or {}).get("result") != {"x": 1}:
        raise SystemExit(f"call bench_echo did not echo (try --direct): {_text(echo)[:500]}")

    async def execute() -> None:
        if (await client.call_tool("call", execute_args)).is_error:
            raise SystemExit("call execute failed mid-run")

    async def lambda_echo() -> None:
        if (await client.call_tool("call", lambda_args)).is_error:
            raise SystemExit("call bench_echo failed mid-run")

    return {"execute": execute, "lambda": lambda_echo}


def direct_call(sandbox: Sandbox, workspace: Path) -> Call:
    async def call() -> None:
        outcome = await sandbox.run("python", "print(1)", workspace=workspace)
        if outcome.stdout != "1\n":
            raise SystemExit(f"Sandbox.run printed {outcome.stdout!r}, stderr {outcome.stderr!r}")

    return call


async def run(n: int, warmup: int, direct: bool) -> bool:
    settings = SandboxSettings()
    sandbox = Sandbox(settings)
    await sandbox.probe()
    if not sandbox.available:
        raise SystemExit(f"No sandbox here: {sandbox.unavailable_reason()}")
    with tempfile.TemporaryDirectory(prefix="mcp-harness-bench-") as tmp:
        calls: dict[str, Call] = {"bare": bare_spawn(settings.python)}
        if direct:
            calls["execute"] = direct_call(sandbox, Path(tmp) / "memory")
            samples = await measure(calls, n, warmup)
        else:
            params = StdioServerParameters(
                command=sys.executable, args=["-m", "mcp_harness", "serve", "--data-dir", tmp]
            )
            async with Client(params) as client:
                calls.update(await mcp_calls(client))
                samples = await measure(calls, n, warmup)
    mode = "Sandbox.run in-process" if direct else "MCP `call` over stdio"
    print(f"{n} calls each after {warmup} warm-up, {mode}; process limit: {sandbox.check().process_limit}")
    b50 = percentile(samples["bare"], 50)
    labels = {"bare": "bare python3 -c", "execute": "execute print(1)", "lambda": "lambda bench_echo"}
    for name, values in samples.items():
        p50, p99 = percentile(values, 50), percentile(values, 99)
        ratio = "" if name == "bare" else f"   overhead x{p50 / b50:.2f} (+{p50 - b50:.1f} ms)"
        print(f"{labels[name]:<18} p50 {p50:7.1f} ms   p99 {p99:7.1f} ms{ratio}")
    met = percentile(samples["execute"], 50) <= P50_TARGET_MS
    print(f"execute p50 target <= {P50_TARGET_MS:.0f} ms: {'met' if met else 'MISSED'}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=100, help="timed calls of each kind (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls of each kind first (default 5)")
    parser.add_argument("--direct", action="store_true", help="time Sandbox.run in-process instead of MCP calls")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    args = parser.parse_args()
    if args.n < 1 or args.warmup < 0:
        parser.error("--n must be at least 1, --warmup at least 0")
    met = anyio.run(run, args.n, args.warmup, args.direct)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
