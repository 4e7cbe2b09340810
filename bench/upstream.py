"""Other MCP servers behind `call` (issue 20): what mounting them costs a model's context, and what a call costs.

Why: a client pays every mounted server's tool schemas on every turn; mounted behind the harness, the client sees
the five verbs however many servers there are, and each upstream tool is one `call` away. This prints:

- tokens: o200k_base tokens of the `tools/list` our server answers (`mcp-harness serve` over stdio) with
  `@modelcontextprotocol/server-filesystem`, `server-memory` (stdio) and `server-everything` (Streamable HTTP, on a
  loopback port) mounted, against the three servers' own `tools/list` arrays together, as a client mounting them
  directly sends them (measured as bench/tokens.py measures: wire field names, absent fields left out, compact JSON);
- latency: p50 and p99 of `call {tool: "mcp__memory__read_graph"}` through the harness against `read_graph` called
  directly on the same server, both over stdio with the SDK `Client`, alternating in blocks. Target: ≤ +2 ms p50.
  On Linux also the harness process's CPU time per call (user + system), which moves far less than wall time when
  other work loads the box.

The servers come from tests/js/node_modules (pinned in tests/js/package.json; `npm ci --prefix tests/js`).
Run: `.venv/bin/python bench/upstream.py [--n 300] [--check]`; `--check` exits 1 when the p50 overhead is over the
target (left out of `make bench`: on a shared 2-core box the figure moves with the load, see bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

ROOT = Path(__file__).resolve().parents[1]
NODE = ROOT / "tests" / "js" / "node_modules" / "@modelcontextprotocol"
FILESYSTEM = NODE / "server-filesystem" / "dist" / "index.js"
MEMORY = NODE / "server-memory" / "dist" / "index.js"
EVERYTHING = NODE / "server-everything" / "dist" / "index.js"
TARGET_MS = 2.0
BLOCK = 25


def _tokens(value: object) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
    return len(encoding.encode(json.dumps(value, separators=(",", ":"))))


def _wire(tools: list[types.Tool]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _quiet(scratch: Path, name: str) -> Any:
    return (scratch / f"{name}.stderr").open("w")


async def _listed(client: Client) -> list[types.Tool]:
    return (await client.list_tools()).tools


async def _timed(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _harness_cpu_ms() -> float | None:
    """CPU time so far of our `mcp-harness serve` child (Linux /proc), or None where that cannot be read."""
    try:
        children = [
            c for t in os.listdir("/proc/self/task") for c in Path(f"/proc/self/task/{t}/children").read_text().split()
        ]
        for pid in children:
            if "mcp_harness\0serve" in Path(f"/proc/{pid}/cmdline").read_text():
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return None


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(n: int, check: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="mcp-harness-upstream-") as tmp:
        scratch = Path(tmp)
        (scratch / "files").mkdir()
        port = _free_port()
        everything = subprocess.Popen(
            ["node", str(EVERYTHING), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            for _ in range(400):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    await anyio.sleep(0.025)
            memory_env = {**get_default_environment(), "MEMORY_FILE_PATH": str(scratch / "memory.jsonl")}
            fs = StdioServerParameters(command="node", args=[str(FILESYSTEM), str(scratch / "files")])
            memory = StdioServerParameters(command="node", args=[str(MEMORY)], env=memory_env)
            config = scratch / "config.toml"
            config.write_text(
                '[[mcp.servers]]\nname = "fs"\n'
                f"command = {json.dumps(['node', str(FILESYSTEM), str(scratch / 'files')])}\n"
                '[[mcp.servers]]\nname = "memory"\n'
                f"command = {json.dumps(['node', str(MEMORY)])}\n"
                f"env = {{ MEMORY_FILE_PATH = {json.dumps(str(scratch / 'memory.jsonl'))} }}\n"
                f'[[mcp.servers]]\nname = "everything"\nurl = {json.dumps(url)}\n'
            )
            env = {**os.environ, "MCP_HARNESS_DATA_DIR": str(scratch / "data"), "MCP_HARNESS_CONFIG": str(config)}
            ours = StdioServerParameters(command=sys.executable, args=["-m", "mcp_harness", "serve"], env=env)

            with _quiet(scratch, "fs") as e1, _quiet(scratch, "memory") as e2, _quiet(scratch, "ours") as e3:
                async with (
                    Client(stdio_client(fs, errlog=e1)) as fs_client,
                    Client(url) as everything_client,
                    Client(stdio_client(memory, errlog=e2)) as memory_client,
                    Client(stdio_client(ours, errlog=e3)) as harness,
                ):
                    direct = [*await _listed(fs_client), *await _listed(memory_client)]
                    direct += await _listed(everything_client)
                    verbs = await _listed(harness)
                    direct_tokens, our_tokens = _tokens(_wire(direct)), _tokens(_wire(verbs))
                    listing = await harness.call_tool("read", {"address": "~/tools/"})
                    mounted = [n for n in (listing.structured_content or {}).get("tools", []) if n.startswith("mcp__")]
                    print(f"tools/list, o200k tokens — the three servers mounted directly: {len(direct)} tools, "
                          f"{direct_tokens:,} tokens")  # fmt: skip
                    print(f"tools/list, o200k tokens — mcp-harness with the three mounted: {len(verbs)} tools, "
                          f"{our_tokens:,} tokens ({len(mounted)} upstream tools one call away); "
                          f"{direct_tokens / our_tokens:.1f}× fewer")  # fmt: skip

                    async def through() -> None:
                        result = await harness.call_tool("call", {"tool": "mcp__memory__read_graph", "input": {}})
                        assert not result.is_error, result.content

                    async def straight() -> None:
                        result = await memory_client.call_tool("read_graph", {})
                        assert not result.is_error, result.content

                    for fn in (through, straight):
                        await _timed(fn, 20)  # warm both paths (and the harness's warm connection)
                    ours_ms: list[float] = []
                    direct_ms: list[float] = []
                    cpu_before = _harness_cpu_ms()
                    for _ in range(max(1, n // BLOCK)):
                        ours_ms += await _timed(through, BLOCK)
                        direct_ms += await _timed(straight, BLOCK)
                    cpu_after = _harness_cpu_ms()
        finally:
            everything.terminate()
            everything.wait(10)
    p50_ours, p50_direct = statistics.median(ours_ms), statistics.median(direct_ms)
    overhead = p50_ours - p50_direct
    print(f"call p50 — direct over stdio: {p50_direct:.2f} ms (p99 {_p(direct_ms, 0.99):.2f}); through mcp-harness: "
          f"{p50_ours:.2f} ms (p99 {_p(ours_ms, 0.99):.2f}); overhead {overhead:+.2f} ms "
          f"(target ≤ +{TARGET_MS:g} ms, {len(ours_ms)} calls each)")  # fmt: skip
    if cpu_before is not None and cpu_after is not None:
        print(f"harness CPU per call (user + system): {(cpu_after - cpu_before) / len(ours_ms):.2f} ms")
    return 1 if check and overhead > TARGET_MS else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=300, help="calls per path (default 300)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the p50 overhead misses the target")
    args = parser.parse_args()
    sys.exit(anyio.run(run, args.n, args.check))


if __name__ == "__main__":
    main()
