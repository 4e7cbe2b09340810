"""SQLite persistence: the connection, ordered migrations, and one module per aggregate."""

from mcp_harness.store.agents import AgentRecord, AgentStore
from mcp_harness.store.db import Database
from mcp_harness.store.sessions import EventRecord, SessionRecord, SessionStore

__all__ = ["AgentRecord", "AgentStore", "Database", "EventRecord", "SessionRecord", "SessionStore"]
