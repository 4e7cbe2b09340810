"""Small helpers shared by the aggregate modules."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime


def now_ms() -> int:
    """Epoch milliseconds, the timestamp unit of every table."""
    return int(time.time() * 1000)


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds and a `Z`, the form the Seed API and MCP tasks use."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A fresh opaque id, time-ordered (UUIDv7: 48 bits of epoch milliseconds, then 74 random bits; hex with
    dashes). Why ordered: ids are the keys of the tables that grow (sessions, runs, events), and a random key puts
    each new row of an index on a page of its own, anywhere in the tree; rows made together (a reply's children,
    a batch of replies) then dirty one page each, which every commit writes out, and a large store reads them in
    first. Ordered ids put them side by side, on the tree's newest pages. Spelled out: building a `UUID` object
    took most of the time, and every logged event takes one."""
    b = bytearray(int(time.time() * 1000).to_bytes(6, "big") + os.urandom(10))
    b[6] = (b[6] & 0x0F) | 0x70  # version 7
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 9562 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
