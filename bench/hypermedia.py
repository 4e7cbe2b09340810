"""Hypermedia throughput: signed blobs per second, against cbor2 + PyNaCl doing the same work in the same run.

Why: every document the harness publishes to Seed is a run of signed DAG-CBOR blobs (a Change per edit, a Ref per
publish), encoded by our own pure-Python canonical encoder (`hypermedia.cbor`, see its docstring for why not cbor2)
and checked against Seed's structural rules before signing. This measures what that costs per blob against the
fastest obvious way to do the same work: cbor2's compiled encoder and a PyNaCl `SigningKey` made once.

What, section `blobs`: N distinct Change blobs of five `ReplaceBlock` ops each are prepared as maps up front. Ours
runs `sign_blob` on each (prune, check, encode with a zeroed `sig`, sign, splice the signature in, copy the map
for `Blob.value`); the baseline runs `cbor2.dumps(canonical=True)` on the same map with a zeroed `sig` (CIDs as tag
42), `SigningKey.sign`, and `cbor2.dumps` again. Both are timed over the whole batch, in rounds that alternate which
goes first; the median round of each is reported in blobs per second, with the ratio baseline / ours. Before
timing, one blob of each is checked: ours must pass `verify_blob`, and the baseline's bytes are compared with ours.

What, section `publish`: through the SDK's in-memory `Client` on a fresh harness (real SQLite, a signing identity
granted to the agent), a 50-block document (headings, paragraphs with bold and links, list items, a code block) is
created, then edited one block at a time: each timed iteration is a `write hm://… {action: update}` changing one
paragraph followed by a `read` of the document as markdown. The baseline is the same server doing the same round
trip on a memory file of the same markdown (`write ~/memory/…` + `read`), so the ratio isolates what publishing costs
beyond an ordinary durable write: markdown parsing and diffing, signing a Change and a Ref, indexing, applying the
changes and rendering. Prints p50/p99 of both and the ratio of p50s; the first create is reported on its own.

What, section `sync`: push and pull throughput between two instances on loopback, each against a bare HTTP client
doing the same transfer (`bench/hypermedia_sync.py` says exactly what each measures).

Run: `.venv/bin/python bench/hypermedia.py [--n 2000] [--rounds 5] [--iterations 200] [--documents 100]
[--section blobs|publish|sync]`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import cbor2
import nacl.signing

from mcp_harness.hypermedia.blobs import ZERO_SIGNATURE, genesis_change, sign_blob, verify_blob
from mcp_harness.hypermedia.cid import CID
from mcp_harness.identity.keys import KeyPair

OPS_PER_CHANGE = 5
TS = 1_764_500_000_000


def change_maps(key: KeyPair, n: int) -> list[dict[str, Any]]:
    """`n` unsigned Change maps on one genesis, five ReplaceBlock ops each, every blob's text distinct."""
    genesis = genesis_change(key).cid
    maps: list[dict[str, Any]] = []
    for i in range(n):
        ops = [
            {
                "type": "ReplaceBlock",
                "block": {
                    "id": f"blk{j}",
                    "type": "Paragraph",
                    "text": f"Paragraph {j} of change {i}: some ordinary prose of a typical length for a block.",
                    "annotations": [{"type": "Bold", "starts": [0], "ends": [9]}],
                },
            }
            for j in range(OPS_PER_CHANGE)
        ]
        body = {"ops": ops, "opCount": len(ops)}
        maps.append({"type": "Change", "genesis": genesis, "deps": [genesis], "depth": 1, "body": body, "ts": TS + i})
    return maps


def _tagged(value: Any) -> Any:
    """The map with CIDs as cbor2 tag 42, as DAG-CBOR writes them: what cbor2 needs to encode the same value."""
    if isinstance(value, CID):
        return cbor2.CBORTag(42, b"\0" + value.to_bytes())
    if isinstance(value, list):
        return [_tagged(item) for item in value]
    if isinstance(value, dict):
        return {key: _tagged(item) for key, item in value.items()}
    return value


def baseline_signer(key: KeyPair) -> Callable[[dict[str, Any]], bytes]:
    signing_key = nacl.signing.SigningKey(key.seed)
    principal = key.principal

    def sign(value: dict[str, Any]) -> bytes:
        blob = {**value, "signer": principal, "sig": ZERO_SIGNATURE}
        blob["sig"] = signing_key.sign(cbor2.dumps(blob, canonical=True)).signature
        return cbor2.dumps(blob, canonical=True)

    return sign


def timed_rounds(runs: dict[str, Callable[[], None]], rounds: int) -> dict[str, list[float]]:
    """Seconds per run of each, `rounds` times, rotating which goes first so that machine noise lands on all alike."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    for i in range(rounds):
        for name in order[i % len(order) :] + order[: i % len(order)]:
            start = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def section_blobs(n: int, rounds: int) -> None:
    key = KeyPair.from_seed(bytes(range(32)))
    maps = change_maps(key, n)
    tagged = [_tagged(value) for value in maps]
    baseline = baseline_signer(key)

    ours = sign_blob(key, maps[0])
    if verify_blob(ours.data, ours.cid) != ours:
        raise SystemExit("sign_blob made a blob verify_blob does not return unchanged")
    same_bytes = baseline(tagged[0]) == ours.data

    def run_ours() -> None:
        for value in maps:
            sign_blob(key, value)

    def run_baseline() -> None:
        for value in tagged:
            baseline(value)

    seconds = timed_rounds({"ours": run_ours, "baseline": run_baseline}, rounds)
    ours_rate = n / statistics.median(seconds["ours"])
    base_rate = n / statistics.median(seconds["baseline"])
    print(
        f"blobs: {n} Change blobs of {OPS_PER_CHANGE} ReplaceBlock ops ({len(ours.data)} bytes each), {rounds} rounds"
    )
    print(f"  sign_blob (check + canonical DAG-CBOR + Ed25519)  {ours_rate:9.0f} blobs/s")
    print(f"  cbor2 canonical + PyNaCl sign (baseline)          {base_rate:9.0f} blobs/s")
    print(f"  ratio baseline / ours: {base_rate / ours_rate:.2f}x   (baseline bytes identical to ours: {same_bytes})")


def fifty_block_document() -> str:
    """Markdown of 50 blocks: 5 sections of a heading, 6 paragraphs, 2 list items and a code block."""
    parts = ["---\nname: Bench document\n---\n"]
    for section in range(5):
        parts.append(f"## Section {section}\n")
        parts.extend(
            f"Paragraph {p} of section {section} has **bold words** and a [link](https://example.org/{section}/{p}) "
            "in ordinary prose of a typical length.\n"
            for p in range(6)
        )
        parts.append("- first point\n- second point\n")
        parts.append(f"```python\nprint({section})\n```\n")
    return "\n".join(parts)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]


def section_publish(iterations: int) -> None:
    anyio.run(_publish, iterations)


async def _publish(iterations: int) -> None:
    from mcp import Client

    from mcp_harness.config import load_settings
    from mcp_harness.definition import normalize_definition
    from mcp_harness.harness import Harness
    from mcp_harness.identity.identities import create_identity
    from mcp_harness.server import build_server

    markdown = fifty_block_document()
    with tempfile.TemporaryDirectory() as tmp:
        harness = Harness(load_settings(data_dir=Path(tmp)))
        identity = create_identity(harness, "Bench")
        agent = harness.agent()
        granted = {**agent.definition.to_json(), "signingKeys": [identity.name]}
        harness.agents.update(agent.id, normalize_definition(granted))
        url = f"hm://{identity.account_id}/bench"
        async with Client(build_server(harness)) as client:

            async def ok(verb: str, arguments: dict[str, Any]) -> dict[str, Any]:
                result = await client.call_tool(verb, arguments)
                if result.is_error or not isinstance(result.structured_content, dict):
                    raise SystemExit(f"{verb} failed: {result.content}")
                return result.structured_content

            start = time.perf_counter()
            await ok("write", {"address": url, "content": markdown})
            created = time.perf_counter() - start
            blocks = len(re.findall(r"<!-- id:", (await ok("read", {"address": url}))["markdown"]))
            await ok("write", {"address": "~/memory/bench.md", "content": markdown})
            samples: dict[str, list[float]] = {"publish": [], "memory": []}
            for i in range(iterations):
                edited = markdown.replace("Paragraph 3 of section 2", f"Paragraph 3 (edit {i}) of section 2")
                for name, write, read in (
                    ("publish", {"address": url, "content": edited, "options": {"action": "update"}}, {"address": url}),
                    ("memory", {"address": "~/memory/bench.md", "content": edited}, {"address": "~/memory/bench.md"}),
                ):
                    begin = time.perf_counter()
                    await ok("write", write)
                    body = await ok("read", read)
                    samples[name].append(time.perf_counter() - begin)
                    if f"(edit {i})" not in str(body.get("markdown", body.get("content", ""))):
                        raise SystemExit(f"{name}: the read did not return the edit")
        harness.close()
    pub, mem = samples["publish"], samples["memory"]
    print(f"publish: a {blocks}-block document, {iterations} update+read round trips through the in-memory client")
    print(f"  first create: {created * 1000:.1f} ms")
    for label, samples_ in (("hm:// update + read", pub), ("memory write + read", mem)):
        p50, p99 = percentile(samples_, 50) * 1000, percentile(samples_, 99) * 1000
        print(f"  {label:22}  p50 {p50:6.2f} ms  p99 {p99:6.2f} ms")
    print(f"  ratio publish / memory (p50): {percentile(pub, 50) / percentile(mem, 50):.2f}x")


SECTIONS: dict[str, Callable[[argparse.Namespace], None]] = {
    "blobs": lambda args: section_blobs(args.n, args.rounds),
    "publish": lambda args: section_publish(args.iterations),
    "sync": lambda args: _section_sync(args.documents, min(args.rounds, 3)),
}


def _section_sync(documents: int, rounds: int) -> None:
    from hypermedia_sync import section_sync  # bench/hypermedia_sync.py: push/pull between two instances

    section_sync(documents, rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=2000, help="blobs per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each (default 5)")
    parser.add_argument("--iterations", type=int, default=200, help="publish round trips (default 200)")
    parser.add_argument("--documents", type=int, default=100, help="documents pushed and pulled per sync round")
    parser.add_argument("--section", choices=[*SECTIONS, "all"], default="all", help="which section (default all)")
    args = parser.parse_args()
    if args.n < 1 or args.rounds < 1:
        parser.error("--n and --rounds must be at least 1")
    for name, section in SECTIONS.items():
        if args.section in (name, "all"):
            section(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
