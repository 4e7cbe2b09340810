"""`mcp-harness identity update NAME --avatar FILE`: the picture goes to IPFS (the block store, as `write ipfs://`
would put it) and the profile is republished with `avatar: ipfs://<cid>`; the identity's metadata keeps the `icon`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_harness.cli import main
from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.unixfs import import_bytes
from mcp_harness.store.ipfs_blocks import IpfsBlockStore
from tests.hypermedia.unixfs_kit import K, file_bytes


def _cli(capsys: pytest.CaptureFixture[str], data: Path, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--data-dir", str(data)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_avatar_is_uploaded_and_the_profile_republished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    code, out, _ = _cli(capsys, data, "identity", "create", "--label", "Alice", "--json")
    account = json.loads(out)["accountId"]
    picture = tmp_path / "me.jpg"
    picture.write_bytes(file_bytes(K + 3, "avatar"))
    code, out, err = _cli(capsys, data, "identity", "update", "Alice", "--avatar", str(picture), "--json")
    assert code == 0, err
    updated = json.loads(out)
    cid = import_bytes(picture.read_bytes())[0]
    assert updated["icon"] == f"ipfs://{cid}" and updated["label"] == "Alice"
    harness = Harness(load_settings(data_dir=data))
    try:
        profile = harness.hypermedia.profile(account)
        assert profile is not None and profile["avatar"] == f"ipfs://{cid}" and profile["name"] == "Alice"
        assert IpfsBlockStore(harness.db).has(cid)
        record = harness.secrets.find(harness.account_id, updated["name"])
        assert record is not None and record.metadata["icon"] == f"ipfs://{cid}"
    finally:
        harness.close()
    # A new label and the picture together; the picture kept when only the label changes.
    code, out, _ = _cli(capsys, data, "identity", "update", account, "--label", "Alice B", "--avatar", str(picture))
    assert code == 0 and out == f"Updated signing identity 'Alice B': avatar ipfs://{cid} ({account}).\n"
    assert _cli(capsys, data, "identity", "update", account, "--label", "Alice C")[0] == 0
    harness = Harness(load_settings(data_dir=data))
    try:
        profile = harness.hypermedia.profile(account)
        assert profile is not None and profile["avatar"] == f"ipfs://{cid}" and profile["name"] == "Alice C"
    finally:
        harness.close()


def test_update_needs_something_to_change_and_a_readable_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    _cli(capsys, data, "identity", "create", "--label", "Bob")
    code, _, err = _cli(capsys, data, "identity", "update", "Bob")
    assert code == 2 and "--label NAME, --avatar FILE" in err
    code, _, err = _cli(capsys, data, "identity", "update", "Bob", "--avatar", str(tmp_path / "none.png"))
    assert code == 2 and "Cannot read" in err
