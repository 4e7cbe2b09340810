"""What the five verbs cost a model on every turn: o200k tokens of our `tools/list`, against MCP's reference servers.

Why: a client sends a server's tool list to the model with every request, so its size is paid on every turn of
every conversation. The verbs' `tools/list` descriptions are kept concise (a line per address form or option); the
full contracts are read on demand with `read ~/tools/<verb>` and cost nothing until then.

The measure, the same for every server: the `tools` array of its `tools/list` result, each tool as the SDK client
parses it dumped with `model_dump(mode="json", by_alias=True, exclude_none=True)` (wire field names, absent fields
left out), serialized as `json.dumps(tools, separators=(",", ":"))` — compact separators, and Python's default
`ensure_ascii=True`, so a non-ASCII character counts as its `\\uXXXX` escape (a few tokens more than raw UTF-8: the
stricter count) — then encoded with o200k_base (`bpe-openai`, which bundles it: nothing is downloaded). A tool's
own count is the same for that one tool object alone; the total is the whole array's, not the sum of the parts.

Ours: `build_server` over a fresh data directory through the in-memory SDK `Client`, before anything is promoted,
so exactly the five verbs. The references: `@modelcontextprotocol/server-filesystem`, `server-memory`,
`server-everything` and `server-sequential-thinking` at the pinned versions below, installed with npm when missing
into a prefix inside the running virtualenv (`.venv/bench-npm/`, beside the bench-only pip packages: outside the
work tree, removed by `make clean`; no package.json or lock file is written), and spawned over stdio with the SDK
`Client` and `StdioServerParameters` (their stderr goes to a temp file).

Prints, for ours and for each reference, the total and every tool's count, and the ratio of ours to each. Exits 1
when ours is at or over BUDGET (2,600 tokens), else 0. `--ours-only` skips the reference servers (no npm needed).
Run: `.venv/bin/python bench/tokens.py [--ours-only]`.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

BUDGET = 2_600
"""The five verbs' tools/list stays under this many o200k tokens (tests/verbs/test_contracts.py holds it too)."""

PREFIX = Path(sys.prefix) / "bench-npm"
"""Where the reference servers are installed: the running virtualenv, like the bench's other bench-only packages."""
REFERENCES = {
    "server-filesystem": "2026.8.31",
    "server-memory": "2026.8.31",
    "server-everything": "2026.8.31",
    "server-sequential-thinking": "2026.8.31",
}
"""The reference servers measured, by package under `@modelcontextprotocol/`, at pinned versions."""


@functools.cache
def _encoding() -> Any:
    """o200k_base from bpe-openai. Imported here: its import loads every bundled vocabulary (a few seconds), with
    importlib.resources.open_binary, which warns as deprecated since Python 3.11."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding("o200k_base")


def tool_json(tool: types.Tool) -> dict[str, Any]:
    """A tool as the wire carries it: wire names, absent fields left out."""
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


def tokens(value: object) -> int:
    """o200k_base tokens of `value` as compact JSON (`ensure_ascii` left at its default, True)."""
    return len(_encoding().encode(json.dumps(value, separators=(",", ":"))))


def measure(tools: list[types.Tool]) -> tuple[int, dict[str, int]]:
    """(tokens of the whole `tools` array, tokens of each tool by name)."""
    dumped = [tool_json(t) for t in tools]
    return tokens(dumped), {t["name"]: tokens(t) for t in dumped}


async def ours() -> list[types.Tool]:
    """The verbs as a fresh server lists them."""
    from mcp_harness.config import load_settings
    from mcp_harness.harness import Harness
    from mcp_harness.server import build_server

    with tempfile.TemporaryDirectory(prefix="mcp-harness-tokens-") as tmp:
        harness = Harness(load_settings(data_dir=Path(tmp)))
        try:
            async with Client(build_server(harness)) as client:
                return (await client.list_tools()).tools
        finally:
            harness.close()


def _installed(package: str, version: str) -> bool:
    manifest = PREFIX / "node_modules" / "@modelcontextprotocol" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"] == version
    except (OSError, ValueError, KeyError):
        return False


def install_references() -> None:
    """npm-install every pinned reference server into PREFIX unless all are there already (in one command: npm
    prunes what a `--no-save` install does not name)."""
    if all(_installed(p, v) for p, v in REFERENCES.items()):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is not on PATH: the reference servers come from npm (or run with --ours-only).")
    PREFIX.mkdir(exist_ok=True)
    specs = [f"@modelcontextprotocol/{p}@{v}" for p, v in REFERENCES.items()]
    print(f"installing {', '.join(specs)} into {PREFIX} …", flush=True)
    flags = ["--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--silent"]
    subprocess.run([npm, "install", "--prefix", str(PREFIX), *flags, *specs], check=True)


async def reference(package: str, scratch: Path) -> list[types.Tool]:
    """Spawn one reference server over stdio and list its tools. The filesystem server serves a scratch directory;
    the memory server keeps its graph in a scratch file."""
    binary = PREFIX / "node_modules" / ".bin" / f"mcp-{package}"
    args = [str(scratch)] if package == "server-filesystem" else []
    env = {**get_default_environment(), "MEMORY_FILE_PATH": str(scratch / "memory.jsonl")}
    params = StdioServerParameters(command=str(binary), args=args, env=env)
    with (scratch / f"{package}.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            return (await client.list_tools()).tools


def _report(label: str, total: int, per_tool: dict[str, int]) -> None:
    print(f"{label} — {len(per_tool)} tool{'s' if len(per_tool) != 1 else ''}, {total:,} tokens")
    width = max(len(name) for name in per_tool)
    for name, count in per_tool.items():
        print(f"    {name:<{width}}  {count:>5,}")


async def run(ours_only: bool) -> int:
    total, per_tool = measure(await ours())
    verdict = "under" if total < BUDGET else "NOT under"
    _report(f"mcp-harness (the five verbs; {verdict} the {BUDGET:,} budget)", total, per_tool)
    if ours_only:
        return 0 if total < BUDGET else 1
    install_references()
    with tempfile.TemporaryDirectory(prefix="mcp-harness-tokens-ref-") as tmp:
        for package, version in REFERENCES.items():
            ref_total, ref_per_tool = measure(await reference(package, Path(tmp)))
            print()
            _report(f"@modelcontextprotocol/{package} {version}", ref_total, ref_per_tool)
            print(f"    ours / this: {total / ref_total:.2f}×")
    return 0 if total < BUDGET else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ours-only", action="store_true", help="skip the reference servers (no npm)")
    args = parser.parse_args()
    sys.exit(anyio.run(run, args.ours_only))


if __name__ == "__main__":
    main()
