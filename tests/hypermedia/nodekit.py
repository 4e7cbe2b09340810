"""Real `mcp-harness serve --http` processes on loopback for the two-node and crash tests: start one on a data dir
with a bearer token, learn its URL from its banner, talk MCP to it over HTTP, and stop (or `kill -9`) it."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import Process
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import call
from tests.crash.crashkit import tail


@dataclass
class Node:
    base: str
    token: str
    proc: Process
    log: Path

    async def call(self, verb: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One verb call over `/mcp`, as a remote MCP client makes it."""
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        transport = streamable_http_client(f"{self.base}/mcp", http_client=http)
        async with Client(transport, mode="legacy") as client:  # pyright: ignore[reportArgumentType]
            return await call(client, verb, arguments)

    async def kill(self) -> None:
        """SIGKILL: no shutdown path runs."""
        os.kill(self.proc.pid, signal.SIGKILL)
        with anyio.fail_after(15):
            await self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_file(path: Path, text: str, rules_file: Path | None = None) -> Path:
    """A config with a scripted provider (answering "seen" unless `rules_file` is given) and `text` after it."""
    if rules_file is None:
        rules_file = path.with_suffix(".rules.json")
        rules_file.write_text('{"rules": [{"turns": [{"text": "seen"}]}]}')
    head = f'log_level = "INFO"\n\n[providers.scripted]\ntype = "scripted"\nfile = "{rules_file}"\n\n'
    path.write_text(head + text)
    return path


@asynccontextmanager
async def serve_http(data_dir: Path, config: Path, token: str, port: int = 0) -> AsyncIterator[Node]:
    """`serve --http 127.0.0.1:<port>` on `data_dir`; stopped with SIGINT at the end unless already dead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")}
    env |= {"XDG_CONFIG_HOME": str(data_dir.parent / "xdg"), "MCP_HARNESS_HTTP_TOKENS": token}
    argv = [sys.executable, "-m", "mcp_harness", "serve", "--http", f"127.0.0.1:{port}"]
    argv += ["--data-dir", str(data_dir), "--config", str(config)]
    log = data_dir.parent / f"{data_dir.name}.log"
    start = log.stat().st_size if log.exists() else 0  # a restart appends: read only what this process writes
    with log.open("ab") as sink:
        proc = await anyio.open_process(argv, env=env, stderr=sink)
        try:
            base = await _banner(log, start)
            yield Node(base, token, proc, log)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)
                with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
            with anyio.CancelScope(shield=True):
                await proc.wait()
                await proc.aclose()


async def _banner(log: Path, start: int) -> str:
    with anyio.fail_after(60):
        while True:
            text = log.read_bytes()[start:].decode(errors="replace")
            found = re.search(r"serving Streamable HTTP at (http://127\.0\.0\.1:\d+)/mcp", text)
            if found:
                return found.group(1)
            await anyio.sleep(0.05)
    raise AssertionError(f"no banner; log:\n{tail(log)}")  # pragma: no cover - fail_after raises first
