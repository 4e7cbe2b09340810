"""`bench/hypermedia.py --section sync`: push and pull throughput between two instances on loopback (issue 19).

B is a real `mcp-harness serve --http` process (public reads, a publish token); A is a harness in this process with
B in `[[hypermedia.servers]]`. Each round, A publishes `--documents` fresh documents (a genesis, then a Change and a
Ref each; not timed: the publish hook only queues them), then:

- push: A's `Pusher.push_once` delivers the queue (PublishBlobs requests of 200 through the guarded egress, the
  queue rows read and deleted). Baseline: the same number of other fresh blobs POSTed to the same PublishBlobs in
  the same batches by a bare keep-alive `httpx2` client — so the ratio is what the durable queue and the egress cost
  on top of B's own verification and storing, which both pay.
- pull: a fresh harness pulls each of the round's documents from B (`Puller.pull`, comments off: ListChanges,
  Resource and ListEvents, then each raw blob by `GET /ipfs/<cid>`, verified by `Node.ingest`). Baseline: a bare
  keep-alive `httpx2` client GETting the same raw blobs and nothing else — the ratio is what discovery, verification,
  storing and a connection per request cost.

Rates are blobs per second, the median round of each; the ratio is baseline / ours (how many times faster the bare
client is). Rounds alternate which goes first.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.hypermedia.web_api import publish_blobs_body
from mcp_harness.identity.keys import KeyPair

TOKEN = "bench-sync-token"
BATCH = 200


def _start_b(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    config = root / "b.toml"
    config.write_text("[hypermedia]\npublic = true\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")}
    env |= {"XDG_CONFIG_HOME": str(root / "xdg"), "MCP_HARNESS_HTTP_TOKENS": TOKEN}
    log = root / "b.log"
    argv = [sys.executable, "-m", "mcp_harness", "serve", "--http", "127.0.0.1:0"]
    argv += ["--data-dir", str(root / "b"), "--config", str(config)]
    proc = subprocess.Popen(argv, env=env, stderr=log.open("wb"), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"serving Streamable HTTP at (http://127\.0\.0\.1:\d+)/mcp", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"B did not start:\n{log.read_text(errors='replace')[-2000:]}")


def _harness(data_dir: Path, base: str) -> Harness:
    servers = [{"url": base, "token_secret": "seed-b"}]
    harness = Harness(
        load_settings(data_dir=data_dir, hypermedia={"servers": servers}, web={"allow_hosts": ["127.0.0.1"]})
    )
    harness.secrets.set(harness.account_id, "seed-b", TOKEN.encode())
    return harness


def _documents(harness: Harness, key: KeyPair, n: int, *, publish: bool) -> list[Blob]:
    """`n` documents by `key`: published (so queued) or only built; their blobs, genesis first."""
    node = harness.hypermedia
    made: list[Blob] = []
    for i in range(n):
        ops = metadata_operations({"name": f"Doc {i}"}) + document_operations(
            parse_markdown(f"# Doc {i}\n\nText {i}.").tree
        )
        blobs = node.create(key, key.account_id, f"/bench{i:04}", ops)
        if publish:
            node.publish(blobs)
        made += blobs if not made else blobs[1:]  # one genesis per key
    return made


def _bare_push(base: str, blobs: list[Blob]) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx2.Client(base_url=base, headers=headers, timeout=60, verify=False, trust_env=False) as http:
        for start in range(0, len(blobs), BATCH):
            body = publish_blobs_body([(str(b.cid), b.data) for b in blobs[start : start + BATCH]])
            got = http.post("/api/PublishBlobs", content=body, headers={"Content-Type": "application/cbor"})
            if got.status_code != 200:
                raise SystemExit(f"baseline push refused: {got.status_code} {got.text[:300]}")


def _bare_pull(base: str, cids: list[str]) -> None:
    for cid in cids:  # a connection per request, as the egress makes them (so only what is on top differs)
        with httpx2.Client(base_url=base, timeout=60, verify=False, trust_env=False) as http:
            if http.get(f"/ipfs/{cid}").status_code != 200:
                raise SystemExit(f"baseline pull: {cid} not served")


def section_sync(documents: int, rounds: int) -> None:
    rates: dict[str, list[float]] = {"push": [], "push baseline": [], "pull": [], "pull baseline": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        proc, base = _start_b(root)
        try:
            for r in range(rounds):
                a = _harness(root / f"a{r}", base)
                try:
                    key, other = KeyPair.generate(), KeyPair.generate()
                    ours = _documents(a, key, documents, publish=True)
                    theirs = _documents(a, other, documents, publish=False)
                    order = ("ours", "baseline") if r % 2 == 0 else ("baseline", "ours")
                    for which in order:
                        begin = time.perf_counter()
                        if which == "ours":
                            (report,) = a.sync.pusher.push_once(force=True)
                            if report.delivered != len(ours):
                                raise SystemExit(f"push delivered {report.delivered} of {len(ours)}: {report.errors}")
                            rates["push"].append(len(ours) / (time.perf_counter() - begin))
                        else:
                            _bare_push(base, theirs)
                            rates["push baseline"].append(len(theirs) / (time.perf_counter() - begin))
                    puller = _harness(root / f"p{r}", base)
                    try:
                        for which in order:
                            begin = time.perf_counter()
                            if which == "ours":
                                stored = sum(
                                    puller.sync.puller.pull(key.account_id, f"/bench{i:04}", comments=False).stored
                                    for i in range(documents)
                                )
                                rates["pull"].append(stored / (time.perf_counter() - begin))
                            else:
                                _bare_pull(base, [str(b.cid) for b in ours])
                                rates["pull baseline"].append(len(ours) / (time.perf_counter() - begin))
                    finally:
                        puller.close()
                finally:
                    a.close()
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
    med = {name: statistics.median(values) for name, values in rates.items()}
    blobs = 2 * documents + 1
    print(f"sync: {rounds} rounds of {documents} documents ({blobs} blobs) between two instances on loopback")
    print(f"  push (queue + egress, PublishBlobs x{BATCH})        {med['push']:9.0f} blobs/s")
    print(f"  bare httpx2 PublishBlobs (baseline)               {med['push baseline']:9.0f} blobs/s")
    print(f"  ratio baseline / ours: {med['push baseline'] / med['push']:.2f}x")
    print(f"  pull (discover + GET /ipfs + verify + store)      {med['pull']:9.0f} blobs/s")
    print(f"  bare httpx2 GET /ipfs/<cid> (baseline)            {med['pull baseline']:9.0f} blobs/s")
    print(f"  ratio baseline / ours: {med['pull baseline'] / med['pull']:.2f}x")


__all__ = ["section_sync"]
