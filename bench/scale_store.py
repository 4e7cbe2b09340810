"""Storage that does not balloon (issue 15 point 5): database growth per logged call, before and after `gc`.

Why: the log keeps every call's full result, and a daily user's agent reads the same files again and again. Large
values of tool events are stored once by hash (`store/payloads.py`), the log is a rowid table (`store/rowid_tables.py`:
a 1 KiB row no longer takes a 4 KiB overflow page), and `mcp-harness gc` prunes (`store/retention.py`).

What, each in a fresh data dir, every call through `Harness.invoke_sync` in the context the server's own agent loop
uses (a run's: its reads keep the whole content in the logged result, where an MCP client's large reads log only
the small fields):
- `read ~/memory/big.txt` of a 100 KiB file, 1k and 10k times. Target: ≤ 2,000 bytes of database per read
  (1,000 reads add ≤ 2 MB; the issue measured 100 MB).
- `write ~/memory/notes/<i>.txt` of 1 KiB, distinct each time (nothing to share), 1k times. Target: the database
  grows by ≤ 2× the CBOR the two events log (the issue measured ~5 KiB per 1 KiB write: WITHOUT ROWID overflow).
Growth is the file plus its write-ahead log after a TRUNCATE checkpoint. "After gc" prunes as `retain = "0d"`
with the default `keep_last = 200` (the first gc also rewrites the database once with incremental auto-vacuum) and
prints the growth left per call.

Run: `.venv/bin/python bench/scale_store.py [--reads 1000,10000] [--writes 1000]` (about two minutes); exits 1
when a target is missed. `bench/scale.py` runs it as the `storage` curve.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.scope import Scope
from mcp_harness.store._util import now_ms
from mcp_harness.store.retention import Retention, collect, file_bytes
from mcp_harness.verbs.base import VerbContext

READ_TARGET_BYTES = 2000
WRITE_TARGET_RATIO = 2.0
FILE_BYTES = 100 * 1024
WRITE_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Growth:
    ops: int
    per_op: float
    """Database bytes added per call."""
    logged_per_op: float
    """CBOR bytes the call's events log (with each value stored once counted once)."""
    after_gc_per_op: float
    seconds: float


def _context(h: Harness) -> VerbContext:
    agent = h.agent()
    session = h.sessions.create(h.account_id, agent.id)
    run = h.runs.enqueue(
        account_id=h.account_id, title="bench", origin="user", agent_id=agent.id, session_id=session.id
    )
    return VerbContext(
        services=h, agent=agent, session_id=session.id, actor="agent", scope=Scope.of_run(run), run_id=run.id
    )


def _settled(h: Harness) -> int:
    # The server's own checkpointer (store/checkpoint.py) may be mid-checkpoint: then this one reports busy and
    # leaves the log as it is, and the figure would count megabytes of log that the next checkpoint removes.
    for _ in range(50):
        with h.db.reading() as conn:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if not busy:
            break
        time.sleep(0.05)
    else:
        raise SystemExit("The write-ahead log could not be checkpointed: another connection kept it busy.")
    return file_bytes(h.db.path)


def _logged(h: Harness) -> int:
    with h.db.reading() as conn:
        return int(
            conn.execute(
                "SELECT (SELECT COALESCE(SUM(length(event_cbor)), 0) FROM session_events) "
                "+ (SELECT COALESCE(SUM(size), 0) FROM event_payloads)"
            ).fetchone()[0]
        )


def _measure(ops: int, verb: str, arguments: Callable[[int], dict[str, Any]], setup: str | None) -> Growth:
    with tempfile.TemporaryDirectory() as tmp:
        h = Harness(load_settings(data_dir=Path(tmp) / "data"))
        try:
            ctx = _context(h)
            if setup is not None:
                _, error = h.invoke_sync(ctx, "write", {"address": "~/memory/big.txt", "content": setup})
                assert error is None, error
            base, logged = _settled(h), _logged(h)
            started = time.perf_counter()
            for i in range(ops):
                _, error = h.invoke_sync(ctx, verb, arguments(i))
                assert error is None, error
            seconds = time.perf_counter() - started
            grown, logged = _settled(h) - base, _logged(h) - logged
            # The bench's run is still queued: finish it, as a turn would, so gc may prune its session.
            with h.db.transaction() as conn:
                conn.execute("UPDATE runs SET status = 'succeeded', finished_at = ?", (now_ms(),))
            collect(h.db, Retention(max_age_ms=0, max_bytes=None, keep_last=200), now=now_ms() + 1)
            after = _settled(h) - base
        finally:
            h.close()
    return Growth(ops, grown / ops, logged / ops, after / ops, seconds)


def _line(label: str, g: Growth, figure: float, target: float, unit: str) -> bool:
    met = figure <= target
    print(
        f"  {label:<28} {g.ops:>6} calls  {g.per_op:9.0f} B/call (logged {g.logged_per_op:7.0f})  "
        f"after gc {g.after_gc_per_op:8.0f} B/call  {figure:7.2f}{unit} / target ≤ {target:g}{unit} "
        f"({figure / target:4.2f} of it): {'met' if met else 'MISSED'}   [{g.seconds:5.1f} s]"
    )
    return met


def curve_storage(reads: tuple[int, ...] = (1000, 10_000), writes: int = 1000) -> bool:
    """Print database growth per call for `reads` of a 100 KiB file and `writes` of 1 KiB; False if a target is
    missed."""
    print("storage: database bytes per logged call (file + WAL after a checkpoint)")
    big = "".join(f"line {i:06d} of a hundred kibibyte file, and some more text\n" for i in range(2000))[:FILE_BYTES]
    ok = True
    for n in reads:
        g = _measure(n, "read", lambda _: {"address": "~/memory/big.txt"}, big)
        ok = _line(f"read 100 KiB file × {n}", g, g.per_op, READ_TARGET_BYTES, " B") and ok
    if writes:
        note = lambda i: {"address": f"~/memory/notes/{i}.txt", "content": (f"{i:08d} " * 200)[:WRITE_BYTES]}  # noqa: E731
        g = _measure(writes, "write", note, None)
        ok = _line(f"write 1 KiB × {writes}", g, g.per_op / g.logged_per_op, WRITE_TARGET_RATIO, "×") and ok
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reads", default="1000,10000", help="comma-separated counts of reads")
    parser.add_argument("--writes", type=int, default=1000)
    args = parser.parse_args()
    reads = tuple(int(n) for n in args.reads.split(",") if n)
    return 0 if curve_storage(reads, args.writes) else 1


if __name__ == "__main__":
    sys.exit(main())
