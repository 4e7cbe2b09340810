"""UnixFS import throughput: ours (`hypermedia/unixfs.py`) against `ipfs-unixfs-importer` 15.4 under Node, on the
same bytes, with the ratio (target ≥ 1).

Why: `write ipfs://`, document pictures and avatars all go through the importer, and it must build exactly the DAG
the JS importer builds (tests/hypermedia/test_unixfs.py checks the CIDs). This measures whether doing that in Python
costs more than the reference implementation does.

What: both sides build the same deterministic bytes from a seed (segment j of 32 KiB is sha256("<seed>:<j>")
repeated; tests/js/unixfs_oracle.mjs does the same), so no megabytes cross a pipe and neither side's timing includes
making them. Each round imports the whole file into an in-memory block store — a Map in JS, a dict here — from
pieces of 1 MiB, as a file stream arrives: chunking, hashing every leaf, building and hashing the balanced tree. The
JS rounds run in one Node process after a warm-up round (JIT), ours after one too; the median round of each is
reported in MiB/s, with ratio = ours / JS. Both CIDs are checked equal first.

Run: `.venv/bin/python bench/ipfs.py [--mib 64] [--rounds 5] [--check]` (`--check` exits 1 below the target).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.unixfs import import_stream

ORACLE = Path(__file__).resolve().parents[1] / "tests" / "js" / "unixfs_oracle.mjs"
SEED = "bench"
PIECE = 1 << 20


def file_bytes(size: int, seed: str) -> bytes:
    """The bytes unixfs_oracle.mjs builds for (size, seed)."""
    out = bytearray()
    j = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}:{j}".encode()).digest() * 1024
        j += 1
    return bytes(out[:size])


def ours(data: bytes, rounds: int) -> tuple[list[float], str]:
    pieces = [data[i : i + PIECE] for i in range(0, len(data), PIECE)]
    times: list[float] = []
    cid = ""
    for _ in range(rounds + 1):  # the first round warms caches and is dropped, as JS's is
        store: dict[CID, bytes] = {}
        start = time.perf_counter()
        cid = str(import_stream(pieces, store.__setitem__).cid)
        times.append(time.perf_counter() - start)
    return times[1:], cid


def reference(size: int, rounds: int) -> tuple[list[float], str]:
    done = subprocess.run(
        ["node", str(ORACLE)],
        input=json.dumps({"op": "bench", "size": size, "seed": SEED, "rounds": rounds + 1}),
        capture_output=True,
        text=True,
        check=True,
    )
    answer = json.loads(done.stdout)
    return [ms / 1000 for ms in answer["ms"][1:]], answer["cid"]


def main() -> int:
    parser = argparse.ArgumentParser(description="UnixFS import throughput against ipfs-unixfs-importer")
    parser.add_argument("--mib", type=int, default=64, help="file size in MiB (default 64)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when the ratio is below 1")
    args = parser.parse_args()
    size = args.mib * 1024 * 1024
    data = file_bytes(size, SEED)
    js_times, js_cid = reference(size, args.rounds)
    py_times, py_cid = ours(data, args.rounds)
    if js_cid != py_cid:
        print(f"CIDs differ: ours {py_cid}, JS {js_cid}", file=sys.stderr)
        return 1
    mib = size / (1024 * 1024)
    py_rate = mib / statistics.median(py_times)
    js_rate = mib / statistics.median(js_times)
    ratio = py_rate / js_rate
    print(f"UnixFS import of {args.mib} MiB ({py_cid}), median of {args.rounds} rounds:")
    print(f"  ours (Python)                 {py_rate:8.1f} MiB/s")
    print(f"  ipfs-unixfs-importer (Node)   {js_rate:8.1f} MiB/s")
    print(f"  ratio ours / JS               {ratio:8.2f}  (target >= 1)")
    return 1 if args.check and ratio < 1 else 0


if __name__ == "__main__":
    sys.exit(main())
