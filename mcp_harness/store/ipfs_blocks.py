"""Placeholder for the IPFS block store (issue 18); its migration is registered in migrations.py."""

from __future__ import annotations

import sqlite3


def migrate(conn: sqlite3.Connection) -> None:
    """Create this store's schema."""
