"""Small helpers shared by the aggregate modules."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime


def now_ms() -> int:
    """Epoch milliseconds, the timestamp unit of every table."""
    return int(time.time() * 1000)


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds and a `Z`, the form the Seed API and MCP tasks use."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id() -> str:
    """A fresh opaque id (UUID4, hex with dashes)."""
    return str(uuid.uuid4())
