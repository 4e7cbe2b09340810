"""The durable push queue: blobs owed to each configured Seed server (issue 19)."""

from __future__ import annotations

import sqlite3


def migrate(conn: sqlite3.Connection) -> None:
    """Create the tables (placeholder until the issue's work lands)."""
    del conn
