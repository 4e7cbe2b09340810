"""How a long-running `serve` process tunes the interpreter once it has started.

The cyclic garbage collector runs a full pass every few hundred thousand allocations, and each pass walks every
object the process holds: the imported SDK, pydantic's schemas, the harness. A listing that builds many small
objects (resources/list over 100k files builds a few million) then spends a third of its time in collections that
find nothing, since almost everything a request allocates is freed by reference counting. So, once start-up is
done, `gc.freeze()` moves what exists into the permanent generation (never scanned again), and the young
generation's threshold rises so collections come a hundred times less often. Cycles are still collected; they just
wait a little longer.
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 50_000
"""Allocations between young-generation collections (CPython's default is 700)."""


def tune_after_startup() -> None:
    """Freeze what start-up built and collect less often. Idempotent; call once the server is built."""
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
