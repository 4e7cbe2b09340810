"""`mcp-harness attach SESSION FILE…`: prints one id a file (its SHA-256), `--json` the records, and exits as the
command's codes say (3 for an unknown session, 2 for a file it cannot read, storing nothing then)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from tests.cli.clikit import run
from tests.store.test_attachments import tiny_png


@pytest.fixture
def session(data_dir: Path) -> str:
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        return harness.sessions.create(harness.account_id, harness.agent().id).id
    finally:
        harness.close()


def held(data_dir: Path, session: str) -> list[str]:
    harness = Harness(load_settings(data_dir=data_dir))
    try:
        return [r.name for r in harness.attachments.list(session)]
    finally:
        harness.close()


def test_attach_prints_the_id_of_each_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, session: str
) -> None:
    png, notes = tmp_path / "photo.png", tmp_path / "notes.md"
    png.write_bytes(tiny_png())
    notes.write_text("# Notes\n")
    code, out, err = run(capsys, "attach", "--data-dir", str(data_dir), session, str(png), str(notes))
    assert (code, err) == (0, "")
    ids = [line.split()[0] for line in out.splitlines()]
    assert ids == [hashlib.sha256(png.read_bytes()).hexdigest(), hashlib.sha256(b"# Notes\n").hexdigest()]
    assert out.splitlines()[0] == f"{ids[0]}  photo.png (image/png, {png.stat().st_size} bytes)"
    assert held(data_dir, session) == ["photo.png", "notes.md"]


def test_attach_json_prints_the_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, session: str
) -> None:
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\x02")
    code, out, _ = run(
        capsys, "attach", "--data-dir", str(data_dir), "--json", "--mime-type", "application/x-thing", session,
        str(tmp_path / "data.bin"),
    )  # fmt: skip
    [record] = json.loads(out)
    assert code == 0 and record["name"] == "data.bin" and record["mimeType"] == "application/x-thing"
    assert record["sessionId"] == session and record["size"] == 3 and record["address"] == f"attachment:{record['id']}"


def test_attach_refuses_an_unknown_session_and_unreadable_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data_dir: Path, session: str
) -> None:
    good = tmp_path / "good.txt"
    good.write_text("fine")
    code, out, err = run(capsys, "attach", "--data-dir", str(data_dir), "no-such-session", str(good))
    assert (code, out) == (3, "") and err.startswith("mcp-harness: No thread no-such-session")
    code, out, err = run(capsys, "attach", "--data-dir", str(data_dir), session, str(good), str(tmp_path / "gone"))
    assert (code, out) == (2, "") and "Cannot attach" in err and "gone" in err
    code, _, err = run(capsys, "attach", "--data-dir", str(data_dir), session, str(tmp_path))
    assert code == 2 and "is a directory" in err
    assert held(data_dir, session) == []  # a bad file among good ones stores none of them
