"""Two harnesses in one test: B serves the Seed web API on loopback (a real uvicorn server), A has B in
`[[hypermedia.servers]]` and may reach loopback (`[web] allow_hosts`). Blocking sync calls go through
`anyio.to_thread` so B, on the same event loop, can answer them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_harness.config import HttpSettings, TokenSettings, load_settings, token_hash
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity
from mcp_harness.server import build_server, http_app
from tests.conftest import serving
from tests.spaces.conftest import grant

TOKEN = "b-publish-token"


@dataclass
class Pair:
    a: Harness
    b: Harness
    base: str
    """B's base URL."""
    alice: Identity
    """A's signing identity (the default agent of A signs as her)."""
    bob: Identity
    """B's signing identity."""


def harness_a(data_dir: Path, base: str, **server: Any) -> Harness:
    entry = {"url": base, "token_secret": "seed-b", **server}
    settings = load_settings(data_dir=data_dir, hypermedia={"servers": [entry]}, web={"allow_hosts": ["127.0.0.1"]})
    harness = Harness(settings)
    harness.secrets.set(harness.account_id, "seed-b", TOKEN.encode())
    return harness


@asynccontextmanager
async def pair(tmp_path: Path, **server: Any) -> AsyncIterator[Pair]:
    b = Harness(load_settings(data_dir=tmp_path / "b", hypermedia={"public": True}))
    bob = create_identity(b, "Bob")
    grant(b, bob)
    tokens = [TokenSettings(hash=token_hash(TOKEN), label="a")]
    app = http_app(build_server(b), host="127.0.0.1", http=HttpSettings(tokens=tokens), ipfs=b)
    try:
        async with serving(app) as base:
            a = harness_a(tmp_path / "a", base, **server)
            try:
                alice = create_identity(a, "Alice")
                grant(a, alice)
                yield Pair(a, b, base, alice, bob)
            finally:
                a.close()
    finally:
        b.close()


def pending(harness: Harness) -> int:
    return sum(b.pending for b in harness.sync.queue.backlog())
