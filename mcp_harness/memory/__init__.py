"""The agent's memory tree on disk: path rules, atomic writes, bounded listings."""

from mcp_harness.memory.paths import normalize_memory_path
from mcp_harness.memory.store import DirPage, MemoryEntry, MemoryFile, MemoryListing, MemoryStore, TopLevelSummary

__all__ = [
    "DirPage",
    "MemoryEntry",
    "MemoryFile",
    "MemoryListing",
    "MemoryStore",
    "TopLevelSummary",
    "normalize_memory_path",
]
