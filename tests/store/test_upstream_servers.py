"""The stored servers are read once per change, not per call, and another process's `mcp add` or `mcp remove` is
seen at once (SQLite's `data_version`), as this process's own are."""

from __future__ import annotations

from pathlib import Path

from mcp_harness.callables.upstream import ServerSpec
from mcp_harness.store.db import Database
from mcp_harness.store.upstream_tools import UpstreamStore


def test_another_connections_changes_show_and_an_unchanged_list_is_not_read_again(tmp_path: Path) -> None:
    ours, theirs = Database(tmp_path / "h.db"), Database(tmp_path / "h.db")  # two processes on one file
    mine, other = UpstreamStore(ours), UpstreamStore(theirs)
    assert mine.list_servers() == []
    other.add_server(ServerSpec(name="files", command=("files-server",)))
    assert [s.name for s in mine.list_servers()] == ["files"]
    statements: list[str] = []
    ours._conn.set_trace_callback(statements.append)  # pyright: ignore[reportPrivateUsage]
    assert [s.name for s in mine.list_servers()] == ["files"]
    assert not any("mcp_servers" in s for s in statements)
    mine.add_server(ServerSpec(name="memory", command=("memory-server",)))
    assert [s.name for s in mine.list_servers()] == ["files", "memory"]
    other.remove_server("files")
    assert [s.name for s in mine.list_servers()] == ["memory"]
    ours.close()
    theirs.close()
