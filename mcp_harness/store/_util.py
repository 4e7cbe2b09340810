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
    """A fresh opaque id (UUID4, hex with dashes): `str(uuid.uuid4())`, spelled out because building the `UUID`
    object took most of the time, and every logged event takes one."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
