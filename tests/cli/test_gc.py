"""`mcp-harness gc`: its report (text and --json), its dry run, its exit codes, and the `[store]` settings it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_harness.config import load_settings
from mcp_harness.errors import BadRequest
from mcp_harness.harness import Harness
from tests.cli.clikit import run
from tests.store.pgkit import Cluster, pg_cluster_fixture  # noqa: F401  (the fixture)


def _old_log(data: Path, events: int) -> str:
    """A session of `events` messages, all logged at the epoch (older than any retention)."""
    h = Harness(load_settings(data_dir=data))
    try:
        session = h.sessions.create(h.account_id, h.agent().id)
        h.sessions.append_many(
            session.id,
            [({"type": "message", "role": "user", "content": f"message {i}"}, "user") for i in range(events)],
        )
        with h.db.transaction() as conn:
            conn.execute("UPDATE session_events SET created_at = 0")
        return session.id
    finally:
        h.close()


def _count(data: Path, session_id: str) -> int:
    h = Harness(load_settings(data_dir=data))
    try:
        return len(h.sessions.events(session_id))
    finally:
        h.close()


def test_a_dry_run_reports_as_json_and_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    session_id = _old_log(data, 250)
    code, out, err = run(capsys, "gc", "--data-dir", str(data), "--dry-run", "--json")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["dryRun"] is True and report["vacuum"] == "none"
    assert report["events"] == {"pruned": 50, "bytes": report["events"]["bytes"], "sessions": 1, "liveSessionsKept": 0}
    assert report["events"]["bytes"] > 0 and report["cutoff"].endswith("Z")
    assert set(report) == {"dryRun", "cutoff", "events", "payloads", "journals", "attachments", "vacuum", "fileBytes"}
    assert report["fileBytes"]["before"] == report["fileBytes"]["after"]
    assert _count(data, session_id) == 250


def test_gc_prunes_to_the_last_n_and_says_what_it_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    session_id = _old_log(data, 250)
    code, out, _ = run(capsys, "gc", "--data-dir", str(data), "--keep-last", "20")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Pruned 230 events (") and " from 1 session older than " in lines[0]
    assert lines[2].endswith("(rewritten once with incremental auto-vacuum).")
    assert _count(data, session_id) == 20
    code, out, _ = run(capsys, "gc", "--data-dir", str(data), "--retain", "forever")
    assert code == 0 and out.startswith("Pruned 0 events (0 B) from 0 sessions (none was old enough).")
    assert out.rstrip().endswith("(incremental vacuum).")


def test_a_retention_a_config_holds_is_used_and_a_bad_one_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    session_id = _old_log(data, 30)
    config = tmp_path / "config.toml"
    config.write_text('[store]\nretain = ["100000d", "1GB"]\nkeep_last = 5\n')
    code, out, _ = run(capsys, "gc", "--data-dir", str(data), "--config", str(config), "--json")
    assert code == 0 and json.loads(out)["events"]["pruned"] == 0, "younger than 100,000 days, smaller than 1 GB"
    config.write_text('[store]\nretain = "10d"\nkeep_last = 5\n')
    assert run(capsys, "gc", "--data-dir", str(data), "--config", str(config))[0] == 0
    assert _count(data, session_id) == 5
    for text in ("retain = 90", 'retain = "90 days"', 'retain = ["1d", "2d"]', "retain = []"):
        config.write_text(f"[store]\n{text}\n")
        code, out, err = run(capsys, "gc", "--data-dir", str(data), "--config", str(config))
        assert (code, out) == (2, ""), text
        assert "store.retain: " in err and 'an age like "90d"' in err and '"forever"' in err, err


@pytest.mark.parametrize(
    ("flags", "setting"),
    [(["--retain", "soon"], "store.retain"), (["--keep-last", "0"], "store.keep_last")],
)
def test_bad_flags_exit_2_naming_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], setting: str
) -> None:
    code, out, err = run(capsys, "gc", "--data-dir", str(tmp_path / "data"), *flags)
    assert (code, out) == (2, "") and err.startswith("mcp-harness: Invalid configuration: ") and f"{setting}: " in err


def test_a_database_that_cannot_be_opened_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "harness.db").write_bytes(b"not a database, just bytes " * 100)
    code, out, err = run(capsys, "gc", "--data-dir", str(data), "--json")
    assert (code, out) == (1, "") and err.startswith("mcp-harness: Cannot open the database"), err


def test_the_settings_say_what_retain_accepts() -> None:
    assert load_settings(None, **{"store.retain": ["12h", "500MiB"]}).store.limits() == (12 * 3_600_000, 500 * 2**20)
    assert load_settings().store.limits() == (90 * 86_400_000, None)
    assert load_settings(None, **{"store.retain": "forever"}).store.limits() == (None, None)
    assert load_settings(None, **{"store.retain": "2GB, 90d"}).store.limits() == (90 * 86_400_000, 2 * 10**9)
    with pytest.raises(BadRequest) as refused:
        load_settings(None, **{"store.retain": "2GB,3GB"})
    assert 'store.retain: Value error, "2GB,3GB" is not a retention: give an age like "90d"' in refused.value.message


def test_gc_deletes_the_attachment_files_no_session_holds_and_keeps_the_held_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from mcp_harness.definition import AgentDefinition

    data = tmp_path / "data"
    h = Harness(load_settings(data_dir=data))
    try:
        kept_session = h.sessions.create(h.account_id, h.agent().id)
        kept = h.attachments.add(kept_session.id, "kept.txt", "text/plain", io.BytesIO(b"kept bytes"))
        definition = AgentDefinition(name="brief", system_prompt="Helps.", model_provider="scripted", model="scripted")
        other = h.create_agent(definition)
        gone_session = h.sessions.create(h.account_id, other.id)
        shared = h.attachments.add(gone_session.id, "same.txt", "text/plain", io.BytesIO(b"kept bytes"))
        gone = h.attachments.add(gone_session.id, "gone.bin", None, io.BytesIO(b"x" * 5000))
        h.agents.delete(other.id)  # its sessions go, and their attachment rows with them; the files stay behind
        kept_path, gone_path = h.attachments.path(kept), h.attachments.path(gone)
    finally:
        h.close()
    assert shared.id == kept.id and gone_path.exists()
    code, out, _ = run(capsys, "gc", "--data-dir", str(data), "--dry-run", "--json")
    assert code == 0 and json.loads(out)["attachments"] == {"files": 1, "bytes": 5000}
    assert gone_path.exists()  # a dry run deletes nothing
    code, out, _ = run(capsys, "gc", "--data-dir", str(data))
    assert code == 0 and "Pruned 1 attachment file no session holds any more (5.0 kB)." in out.splitlines()
    assert not gone_path.exists() and kept_path.read_bytes() == b"kept bytes"


def test_gc_prunes_a_postgresql_store_and_leaves_vacuuming_to_autovacuum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_cluster: Cluster
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[store]\nurl = "{pg_cluster.new_database(migrated=True)}"\nkeep_last = 3\n')
    data = tmp_path / "data"
    h = Harness(load_settings(config, data_dir=data))
    try:
        session = h.sessions.create(h.account_id, h.agent().id)
        h.sessions.append_many(
            session.id, [({"type": "message", "role": "user", "content": f"message {i}"}, "user") for i in range(10)]
        )
        with h.db.transaction() as conn:
            conn.execute("UPDATE session_events SET created_at = 0")
    finally:
        h.close()
    code, out, err = run(capsys, "gc", "--config", str(config), "--data-dir", str(data), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["events"]["pruned"] == 7 and report["vacuum"] == "none"
    h = Harness(load_settings(config, data_dir=data))
    try:
        assert [e.payload["content"] for e in h.sessions.events(session.id)] == [f"message {i}" for i in (7, 8, 9)]
    finally:
        h.close()
    code, out, _ = run(capsys, "gc", "--config", str(config), "--data-dir", str(data))
    assert code == 0 and out.splitlines()[-1].endswith("(autovacuum).")
