"""The shared data root's marker (PostgreSQL): the first start writes it to the store and the data root; a start on
a data root that lacks it or holds another store's refuses, naming the data root, the store and the requirement."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_harness.config import load_settings
from mcp_harness.errors import Conflict
from mcp_harness.harness import Harness
from mcp_harness.store import store_meta
from mcp_harness.store.store_meta import MARKER_FILE
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the pg_cluster fixture)


def _harness(url: str, data: Path) -> Harness:
    return Harness(load_settings(None, data_dir=data, **{"store.url": url}))


def test_replicas_on_one_data_root_start_and_another_root_is_refused(tmp_path: Path, pg_cluster: Cluster) -> None:
    url, shared = pg_cluster.new_database(migrated=True), tmp_path / "shared"
    first = _harness(url, shared)
    marker = (shared / MARKER_FILE).read_text().strip()
    second = _harness(url, shared)  # a second replica on the same (shared) data root
    first.close()
    second.close()
    assert _harness(url, shared).close() is None and (shared / MARKER_FILE).read_text().strip() == marker

    with pytest.raises(Conflict) as lacking:
        _harness(url, tmp_path / "private")
    message = lacking.value.message
    assert f"The data root {tmp_path / 'private'} is not the one the store postgresql://postgres@/" in message
    assert "it lacks the marker file" in message and "every replica must share one data root" in message
    assert not (tmp_path / "private" / MARKER_FILE).exists()  # a refused start writes nothing

    other = tmp_path / "other"
    other.mkdir()
    (other / MARKER_FILE).write_text("someone-else\n")
    with pytest.raises(Conflict, match="holds another store's marker \\('someone-else'\\)"):
        _harness(url, other)


def test_a_new_store_will_not_adopt_another_stores_data_root(tmp_path: Path, pg_cluster: Cluster) -> None:
    shared = tmp_path / "shared"
    _harness(pg_cluster.new_database(migrated=True), shared).close()
    with pytest.raises(Conflict, match=f"The data root {shared} belongs to another store"):
        _harness(pg_cluster.new_database(migrated=True), shared)


def test_sqlite_needs_no_marker(tmp_path: Path) -> None:
    Harness(load_settings(None, data_dir=tmp_path / "data")).close()
    assert (tmp_path / "data" / "harness.db").exists() and not (tmp_path / "data" / MARKER_FILE).exists()


def test_a_first_start_that_fails_before_its_commit_leaves_no_marker_file(
    tmp_path: Path, pg_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, shared = pg_cluster.new_database(migrated=True), tmp_path / "shared"
    real_write = store_meta._write

    def write_then_fail(path: Path, marker: str) -> None:
        real_write(path, marker)
        raise OSError("the store went away before the commit")

    monkeypatch.setattr(store_meta, "_write", write_then_fail)
    with pytest.raises(OSError, match="went away"):
        _harness(url, shared)
    assert not (shared / MARKER_FILE).exists(), "a file without its row would refuse every later start"
    monkeypatch.setattr(store_meta, "_write", real_write)
    _harness(url, shared).close()  # the next start binds the data root as a first start does
    assert (shared / MARKER_FILE).exists()
