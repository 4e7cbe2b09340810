"""The agent's memory tree on disk: path rules, atomic writes, bounded listings."""

from mcp_harness.space.memory import DirPage, MemoryEntry, MemoryFile, MemoryListing, MemoryStore, TopLevelSummary
from mcp_harness.space.paths import normalize_memory_path

__all__ = [
    "DirPage",
    "MemoryEntry",
    "MemoryFile",
    "MemoryListing",
    "MemoryStore",
    "TopLevelSummary",
    "normalize_memory_path",
]
