"""Small helpers shared by the aggregate modules."""

from __future__ import annotations

import time
import uuid


def now_ms() -> int:
    """Epoch milliseconds, the timestamp unit of every table."""
    return int(time.time() * 1000)


def new_id() -> str:
    """A fresh opaque id (UUID4, hex with dashes)."""
    return str(uuid.uuid4())
