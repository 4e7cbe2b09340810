"""Costs that stay flat as a user's data grows (issue 15): one curve per cost, each against its small size.

Why: a daily user's data only grows, so a cost that scales with history is a cliff waiting for them. Each curve here
measures one cost at a small, a medium and a large size in the same run, prints it as a ratio to the small size,
and checks it against its target. A curve is a function `curve_<name>(sizes) -> Curve`; add one to `CURVES`.

Curves:

- `hm-update` — one hypermedia document with V versions (100 / 1k / 10k). Its history is made straight through
  the node (`blobs.change` + `blobs.ref`, stored 500 blobs a transaction: one Change and one Ref a version, each
  changing one paragraph of a 50-block document). Then a fresh harness on that data dir (nothing cached in memory)
  and the SDK's in-memory `Client`: the first `read` of the document is the cold read; then 30 `write hm://…
  {action: update}` calls, each changing one paragraph, give the update p50. Target: update p50 at the largest
  size ≤ 1.5× the smallest. The cold read is printed beside it against the same ratio.
- `hm-directory` — D documents (100 / 1k / 10k) directly under one parent document, made the same way (one Change
  and one Ref each, on the signer's shared genesis). A fresh harness, then the median of 5 `read hm://…/parent/
  :directory` calls (1 when a call takes over 5 s). Target: ≤ 50 ms at the largest size for one page of the view.
  The view is paged (100 children by default), so this is its first page. Beside it, the node's own cost of a
  page: `Node.children(limit=100)` with each child's
  descendant count and the total (`child_count`), on a node with nothing cached, median of 5. Target: flat
  (≤ 1.5× at small).
- `hm-publish` — B background blobs (1k / 100k / 1M) bulk-inserted as synthetic rows straight into `hm_blobs`
  (1,000 synthetic authors, random timestamps, 64 bytes of data each, one `executemany` in one transaction: only
  the table and its indexes matter to publishing, and signing a million real blobs alone would take minutes). On
  top of them, through the node of that same fresh harness: the p50 of 50 publishes, each an `update` of a small
  document (read it, sign a Change and a Ref, store them).
  Target: p50 at the largest size ≤ 1.5× the smallest.
- `resources-list` — n memory files (1k / 10k / 100k), 100 to a directory (bench/memory_listing.py's `tree`
  layout, made with plain os calls), then a fresh harness and the SDK's in-memory `Client`: every page of
  `resources/list` in order, client-side validation included (a real client pays it), best of 3 (2 at 100k).
  Targets: all pages ≤ 3 s at the largest size, and the cost per 1k files flat (≤ 1.5× at small: O(n) in all).

Curves kept in their own modules, run from here (each prints its own lines and says whether it met its target):

- `calls`, `cold-start`, `thread-search` — bench/scale_calls.py: `call`, `tools/list` and `delegate` against a
  session of 1k / 10k / 100k events (≤ 1.5×); cold start and RSS on a 100k-event session (≤ 1.2×, ≤ +20 MiB);
  thread search against 1k / 10k / 100k sessions (≤ 2×).
- `storage` — bench/scale_store.py: database bytes per logged call for reads of a 100 KiB file and 1 KiB writes.
- `fan-out` — bench/scale_fanout.py: 100 leaves of 200 ms in a two-level tree against the ideal (≤ 1.5× with
  max_agent_runs ≥ 100).

The dev box is shared (2 cores): expect ±30% between runs, and repeat a curve that misses narrowly.

Run: `.venv/bin/python bench/scale.py [--only NAME] [--sizes a,b,c]` (all curves: about 2 minutes). Exits 1 when a
target is missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
from hypermedia import fifty_block_document  # bench/hypermedia.py: the same 50-block document

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.hypermedia import blobs
from mcp_harness.hypermedia.blobs import Blob
from mcp_harness.hypermedia.blocks import Block, block_to_op, walk
from mcp_harness.hypermedia.markdown import document_operations, metadata_operations, parse_markdown
from mcp_harness.identity.identities import create_identity, load_keypair
from mcp_harness.identity.keys import KeyPair

BATCH = 500


# --- reporting ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """`ratio`: the largest size's figure over the smallest's at most this; `seconds`: the largest's at most this."""

    ratio: float | None = None
    seconds: float | None = None

    def met(self, small: float, large: float) -> bool:
        if self.ratio is not None and large / small > self.ratio:
            return False
        return self.seconds is None or large <= self.seconds

    def __str__(self) -> str:
        parts = []
        if self.ratio is not None:
            parts.append(f"≤ {self.ratio:g}× at small")
        if self.seconds is not None:
            parts.append(f"≤ {self.seconds * 1000:g} ms at large")
        return ", ".join(parts)


@dataclass(slots=True)
class Curve:
    """A curve's figures: for each line, seconds at each size (in the order of `sizes`), with its target."""

    title: str
    unit: str
    sizes: tuple[int, ...]
    lines: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    targets: dict[str, Target] = field(default_factory=dict[str, Target])

    def report(self) -> bool:
        """Print every line against its target; True when every target is met."""
        print(f"{self.title}:")
        ok = True
        for label, values in self.lines.items():
            cells = [
                f"{_size(n)} {self.unit} {v * 1000:9.2f} ms ({v / values[0]:6.2f}×)"
                for n, v in zip(self.sizes, values, strict=True)
            ]
            target = self.targets.get(label)
            verdict = ""
            if target is not None:
                met = target.met(values[0], values[-1])
                ok = ok and met
                verdict = f"   target {target}: {'met' if met else 'MISSED'}"
            print(f"  {label:<24}" + "   ".join(cells) + verdict)
        return ok


def _size(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k" if n >= 1000 else str(n)


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


# --- a harness with a signing identity --------------------------------------------------------------------------------


@contextmanager
def fresh_harness(data_dir: Path) -> Iterator[Harness]:
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        yield harness
    finally:
        harness.close()


def signer(harness: Harness) -> KeyPair:
    """A new identity the default agent may sign with."""
    identity = create_identity(harness, "Bench")
    agent = harness.agent()
    granted = {**agent.definition.to_json(), "signingKeys": [identity.name]}
    harness.agents.update(agent.id, normalize_definition(granted))
    return load_keypair(harness, identity.name)


@asynccontextmanager
async def client_of(harness: Harness):
    from mcp import Client

    from mcp_harness.server import build_server
    from mcp_harness.server.process import tune_after_startup

    server = build_server(harness)
    tune_after_startup()  # as `serve` does once its server is built (server/process.py)
    async with Client(server) as client:
        await ok(client, "read", {"address": "~/self"})  # warm: the session, the sandbox probe
        yield client


async def ok(client: Any, verb: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(verb, arguments)
    if result.is_error or not isinstance(result.structured_content, dict):
        raise SystemExit(f"{verb} {arguments.get('address')} failed: {result.content}")
    return result.structured_content


def publish_in_batches(harness: Harness, made: Iterator[Blob]) -> None:
    batch: list[Blob] = []
    for blob in made:
        batch.append(blob)
        if len(batch) >= BATCH:
            harness.hypermedia.publish(batch)
            batch = []
    if batch:
        harness.hypermedia.publish(batch)


# --- hm-update ----------------------------------------------------------------------------------------------------


def make_history(harness: Harness, key: KeyPair, path: str, versions: int) -> None:
    """A 50-block document at `path` with `versions` versions, each changing the text of its first paragraph."""
    parsed = parse_markdown(fifty_block_document())
    ops = metadata_operations(parsed.metadata) + document_operations(parsed.tree)
    node = harness.hypermedia
    genesis, first, ref = node.create(key, key.account_id, path, ops)
    node.publish([genesis, first, ref])
    generation = int(ref.value["generation"])
    paragraph: Block = next(n.block for _, n in walk(parsed.tree) if n.block.type == "Paragraph")
    ts = int(ref.value["ts"])  # later versions must win over the first Ref: their ts goes up from it

    def later() -> Iterator[Blob]:
        head, depth = first.cid, 1
        for v in range(1, versions):
            edited = replace(paragraph, text=f"{paragraph.text} (version {v})", annotations=())
            change = blobs.change(
                key,
                genesis=genesis.cid,
                deps=[head],
                depth=depth + 1,
                ops=[{"type": "ReplaceBlock", "block": block_to_op(edited)}],
                ts=ts + v,
            )
            yield change
            yield blobs.ref(
                key,
                space=key.account_id,
                path=path,
                genesis=genesis.cid,
                heads=[change.cid],
                generation=generation,
                ts=ts + v,
            )
            head, depth = change.cid, depth + 1

    publish_in_batches(harness, later())


async def _hm_update(versions: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        with fresh_harness(Path(tmp)) as harness:
            key = signer(harness)
            make_history(harness, key, "/bench", versions)
        url = f"hm://{key.account_id}/bench"
        with fresh_harness(Path(tmp)) as harness:
            async with client_of(harness) as client:
                # Warm the read path (imports, rendering) on another document: what stays is this one's own cost.
                await ok(client, "read", {"address": f"hm://{key.account_id}"})
                start = time.perf_counter()
                markdown = (await ok(client, "read", {"address": url}))["markdown"]
                cold = time.perf_counter() - start
                if f"(version {versions - 1})" not in markdown:
                    raise SystemExit("the read did not return the document's latest version")
                samples: list[float] = []
                for i in range(30):
                    edited = markdown.replace("Paragraph 3 of section 2", f"Paragraph 3 (edit {i}) of section 2")
                    start = time.perf_counter()
                    await ok(client, "write", {"address": url, "content": edited, "options": {"action": "update"}})
                    samples.append(time.perf_counter() - start)
    return p50(samples), cold


def curve_hm_update(sizes: tuple[int, ...]) -> Curve:
    curve = Curve("hm-update: write hm://… {action: update} against the document's versions", "versions", sizes)
    figures = [anyio.run(_hm_update, n) for n in sizes]
    curve.lines["update p50"] = [f[0] for f in figures]
    curve.lines["cold first read"] = [f[1] for f in figures]
    curve.targets["update p50"] = curve.targets["cold first read"] = Target(ratio=1.5)
    return curve


# --- hm-directory ---------------------------------------------------------------------------------------------------


def make_children(harness: Harness, key: KeyPair, parent: str, count: int) -> None:
    node = harness.hypermedia
    node.publish(node.create(key, key.account_id, parent, metadata_operations({"name": "Parent"})))
    genesis = blobs.genesis_change(key)
    ts = blobs.now_ms() - 2 * count - 1000

    def children() -> Iterator[Blob]:
        for i in range(count):
            text = Block(id=f"p{i:05}", type="Paragraph", text=f"Child {i} says something short.")
            ops = [
                *metadata_operations({"name": f"Child {i}"}),
                {"type": "ReplaceBlock", "block": block_to_op(text)},
                {"type": "MoveBlocks", "parent": "", "blocks": [text.id]},
            ]
            change = blobs.change(key, genesis=genesis.cid, deps=[genesis.cid], depth=1, ops=ops, ts=ts + 2 * i)
            yield change
            yield blobs.ref(
                key,
                space=key.account_id,
                path=f"{parent}/c{i:05}",
                genesis=genesis.cid,
                heads=[change.cid],
                generation=ts + 2 * i,
                ts=ts + 2 * i,
            )

    publish_in_batches(harness, children())


def node_page(harness: Harness, space: str, path: str) -> float:
    """Median seconds of one page of 100 children from a node with nothing cached: the page, each child's
    descendant count and the total, as a paged `/:directory` would ask for them. A page takes about 2 ms, so 31
    samples (with 5, a reading of 1.9× was 1.0× the next run)."""
    from mcp_harness.hypermedia.node import Node

    samples: list[float] = []
    for _ in range(31):
        node = Node(harness.db)
        start = time.perf_counter()
        page = node.children(space, path, limit=100)
        for child in page:
            node.descendant_count(space, child.path)
        node.child_count(space, path)
        samples.append(time.perf_counter() - start)
    return p50(samples)


async def _hm_directory(count: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        with fresh_harness(Path(tmp)) as harness:
            key = signer(harness)
            make_children(harness, key, "/dir", count)
        with fresh_harness(Path(tmp)) as harness:
            async with client_of(harness) as client:
                samples: list[float] = []
                while len(samples) < 5 and sum(samples) < 5:
                    start = time.perf_counter()
                    listing = await ok(client, "read", {"address": f"hm://{key.account_id}/dir/:directory"})
                    samples.append(time.perf_counter() - start)
                    # Over 128 KiB the result's structured form keeps only its small fields: check the summary.
                    if f"has {count} child documents" not in listing["summary"]:
                        raise SystemExit(f"the directory did not list {count} documents: {listing['summary']}")
        # The median of three openings: one opening's page sometimes ran at 1.5× the others' throughout, at any size.
        pages = []
        for _ in range(3):
            with fresh_harness(Path(tmp)) as harness:
                pages.append(node_page(harness, key.account_id, "/dir"))
    return p50(samples), p50(pages)


def curve_hm_directory(sizes: tuple[int, ...]) -> Curve:
    curve = Curve("hm-directory: read hm://…/:directory against the documents under it", "docs", sizes)
    figures = [anyio.run(_hm_directory, n) for n in sizes]
    curve.lines["read …/:directory"] = [f[0] for f in figures]
    curve.lines["node page of 100"] = [f[1] for f in figures]
    curve.targets["read …/:directory"] = Target(seconds=0.050)
    curve.targets["node page of 100"] = Target(ratio=1.5)
    return curve


# --- hm-publish -----------------------------------------------------------------------------------------------------


def plant_blobs(harness: Harness, count: int) -> None:
    """`count` synthetic hm_blobs rows (not real blobs: nothing reads them but the indexes)."""
    rng = random.Random(count)
    now = blobs.now_ms()
    kinds = ("Change", "Ref", "Comment", "Profile")
    data = bytes(64)
    rows = (
        (f"bsynthetic{i:09}", kinds[i % 4], f"z6MkSynthetic{i % 1000:04}", now - rng.randrange(10**10), data, now)
        for i in range(count)
    )
    with harness.db.transaction() as conn:
        conn.executemany("INSERT INTO hm_blobs (cid, type, author, ts, data, received_at) VALUES (?,?,?,?,?,?)", rows)


def _hm_publish(count: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        with fresh_harness(Path(tmp)) as harness:
            key = signer(harness)
            plant_blobs(harness, count)
            node = harness.hypermedia
            paragraph = Block(id="para", type="Paragraph", text="Version 0.")
            ops = [
                *metadata_operations({"name": "Small"}),
                {"type": "ReplaceBlock", "block": block_to_op(paragraph)},
                {"type": "MoveBlocks", "parent": "", "blocks": ["para"]},
            ]
            node.publish(node.create(key, key.account_id, "/small", ops))
            samples: list[float] = []
            for i in range(50):
                start = time.perf_counter()
                document = node.document(key.account_id, "/small")
                edit = {"type": "ReplaceBlock", "block": block_to_op(replace(paragraph, text=f"Version {i + 1}."))}
                node.publish(node.update(key, document, [edit]))
                samples.append(time.perf_counter() - start)
    return p50(samples)


def curve_hm_publish(sizes: tuple[int, ...]) -> Curve:
    curve = Curve("hm-publish: one publish (update of a small document) against the blobs held", "blobs", sizes)
    curve.lines["publish p50"] = [_hm_publish(n) for n in sizes]
    curve.targets["publish p50"] = Target(ratio=1.5)
    return curve


# --- resources-list -----------------------------------------------------------------------------------------------


async def _resources_list(count: int) -> float:
    from memory_listing import plant  # bench/ is the script's directory, so its siblings import by name

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        with fresh_harness(Path(tmp)) as harness:
            plant(harness.agent().memory_dir, count, "tree")
            async with client_of(harness) as client:
                best = float("inf")
                for _ in range(2 if count >= 100_000 else 3):
                    start = time.perf_counter()
                    seen, cursor = 0, None
                    while True:
                        page = await client.list_resources(cursor=cursor) if cursor else await client.list_resources()
                        seen += len(page.resources)
                        if (cursor := page.next_cursor) is None:
                            break
                    best = min(best, time.perf_counter() - start)
                    if seen < count:
                        raise SystemExit(f"resources/list listed {seen} resources for {count} files")
    return best


def curve_resources_list(sizes: tuple[int, ...]) -> Curve:
    curve = Curve("resources-list: every page of resources/list against the memory files", "files", sizes)
    figures = [anyio.run(_resources_list, n) for n in sizes]
    curve.lines["all pages"] = figures
    curve.lines["per 1k files"] = [f / (n / 1000) for f, n in zip(figures, sizes, strict=True)]
    curve.targets["all pages"] = Target(seconds=3.0)
    curve.targets["per 1k files"] = Target(ratio=1.5)
    return curve


# --- main -----------------------------------------------------------------------------------------------------------


CURVES: dict[str, tuple[Callable[[tuple[int, ...]], Curve], tuple[int, ...]]] = {
    "hm-update": (curve_hm_update, (100, 1_000, 10_000)),
    "hm-directory": (curve_hm_directory, (100, 1_000, 10_000)),
    "hm-publish": (curve_hm_publish, (1_000, 100_000, 1_000_000)),
    "resources-list": (curve_resources_list, (1_000, 10_000, 100_000)),
}


def _calls(only: str) -> Callable[[], bool]:
    def run() -> bool:
        import scale_calls  # bench/ is the script's directory, so its siblings import by name

        return anyio.run(scale_calls.main, [1_000, 10_000, 100_000], 15, only)

    return run


def _storage() -> bool:
    import scale_store

    return scale_store.curve_storage()


def _fan_out() -> bool:
    import scale_fanout

    return anyio.run(scale_fanout.main, [16, 128], 5)


EXTERNAL: dict[str, Callable[[], bool]] = {
    "calls": _calls("call"),
    "cold-start": _calls("cold"),
    "thread-search": _calls("search"),
    "storage": _storage,
    "fan-out": _fan_out,
}
"""Curves in their own modules (they print their own report); they take no --sizes."""


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--only", choices=[*CURVES, *EXTERNAL], help="run one curve")
    parser.add_argument("--sizes", help="comma-separated sizes overriding the curve's (with --only); the first is 1×")
    args = parser.parse_args()
    if args.sizes and (not args.only or args.only in EXTERNAL):
        parser.error("--sizes needs --only with one of: " + ", ".join(CURVES))
    missed: list[str] = []
    for name, (curve_fn, sizes) in CURVES.items():
        if args.only not in (None, name):
            continue
        if args.sizes:
            sizes = tuple(int(s) for s in args.sizes.split(","))
        started = time.perf_counter()
        curve = curve_fn(sizes)
        if not curve.report():
            missed.append(name)
        print(f"  ({time.perf_counter() - started:.0f} s)")
    for name, run in EXTERNAL.items():
        if args.only not in (None, name):
            continue
        started = time.perf_counter()
        if not run():
            missed.append(name)
        print(f"  ({time.perf_counter() - started:.0f} s)")
    if missed:
        print(f"targets missed: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
