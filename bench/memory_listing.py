"""Memory listings at scale: `resources/list` through every page, and `read ~/memory/`, at 1k, 10k and 100k files.

Why: resources/list used to walk (and stat) the whole memory tree for every page, so listing n files in pages of
100 cost O(n²); `read ~/memory/<dir>/` statted every entry of the directory, and `~/self` walked the whole tree. Now
a page costs what it returns (memory/listing.py): resources/list continues one walk of the tree from page to page,
and a directory read stats only its page. This checks that the cost grows with n (all pages) or not at all (one
page), by printing each figure as a ratio to its 1k figure: ~10× and ~100× for all pages, ~1× for one page.

What: for each size, a fresh harness and the SDK's in-memory `Client`. Two layouts of n small files, made with
plain os calls: `tree` (n/100 directories of 100 files at the root) and `flat` (n files in the root). Timed: every
page of `resources/list` in order, best of 3 at 1k and 10k and one pass at 100k (also shown per page, which should
stay flat), and the median of 10 calls of `read ~/memory/` (its first page of entries) and of `read ~/self` (its
bounded summary). In `tree` the root page is full from 10k on (at 1k the root holds only 10 directories), so its
ratio flattens from there; in `flat`, `read ~/memory/` reads (but does not stat) every name of the root to sort
them, which is allowed to grow with n. The dev box is shared: expect ±30% between runs.

Run: `.venv/bin/python bench/memory_listing.py [--sizes 1000,10000,100000]` (about a minute at the default sizes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.server import build_server

READS = 10


def plant(root: Path, n: int, layout: str) -> None:
    """n files of a few bytes: `tree` puts them 100 to a directory, `flat` all in `root`."""
    root.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for d in range(n // 100 if layout == "tree" else 1):
        where = root / f"d{d:04}" if layout == "tree" else root
        where.mkdir(exist_ok=True)
        base = os.fspath(where)
        for f in range(100 if layout == "tree" else n):
            fd = os.open(f"{base}/f{f:06}.txt", flags, 0o644)
            os.write(fd, b"x\n")
            os.close(fd)


async def measure(n: int, layout: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        harness = Harness(load_settings(data_dir=Path(tmp)))
        try:
            plant(harness.agent().memory_dir, n, layout)
            async with Client(build_server(harness)) as c:
                await c.call_tool("read", {"address": "~/self"})  # warm: the session, the sandbox probe
                passes = 1 if n >= 100_000 else 3
                best, seen, pages = float("inf"), 0, 0
                for _ in range(passes):
                    start = time.perf_counter()
                    seen, pages, cursor = 0, 0, None
                    while True:
                        page = await c.list_resources(cursor=cursor) if cursor else await c.list_resources()
                        seen += len(page.resources)
                        pages += 1
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                    best = min(best, time.perf_counter() - start)
                    assert seen >= n, (seen, n)
                out = {"resources/list, all pages": best, "resources/list, per page": best / pages}
                for label, address in (("read ~/memory/", "~/memory/"), ("read ~/self", "~/self")):
                    times: list[float] = []
                    for _ in range(READS):
                        start = time.perf_counter()
                        result = await c.call_tool("read", {"address": address})
                        times.append(time.perf_counter() - start)
                        assert not result.is_error, result.content
                    out[label] = statistics.median(times)
                return out
        finally:
            harness.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated file counts; the first is 1×")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for layout in ("tree", "flat"):
        results = {n: await measure(n, layout) for n in sizes}
        base = results[sizes[0]]
        print(f"layout {layout} ({'100 files a directory' if layout == 'tree' else 'every file in the root'}):")
        for label in base:
            cells = []
            for n in sizes:
                value = results[n][label]
                cells.append(f"{n // 1000}k {value * 1000:8.1f} ms ({value / base[label]:5.1f}×)")
            print(f"  {label:<27}" + "   ".join(cells))


if __name__ == "__main__":
    anyio.run(main)
