"""Mounted MCP servers and the tool documents of their tools (issue 20)."""

from __future__ import annotations

import sqlite3


def migrate(conn: sqlite3.Connection) -> None:
    """Create the tables (placeholder until the issue's work lands)."""
    del conn
