"""`mcp-harness mcp add|list|show|remove|refresh` and `[[mcp.servers]]` (issue 20 point 1), in process: stdio with
plain and sealed environment values, Streamable HTTP with a sealed bearer token, `--json`, and the exit codes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from mcp_harness.cli import main
from mcp_harness.config import HttpSettings, TokenSettings, load_settings, token_hash
from mcp_harness.harness import Harness
from mcp_harness.server import build_server, http_app
from tests.cli.clikit import run
from tests.conftest import serving

RAW = [sys.executable, str(Path(__file__).with_name("raw_server.py"))]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCP_HARNESS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MCP_HARNESS_MASTER_KEY", "22" * 32)
    return tmp_path


def seal(home: Path, name: str, value: str) -> None:
    h = Harness(load_settings(data_dir=home / "data"))
    try:
        h.secrets.set(h.account_id, name, value.encode())
    finally:
        h.close()


def test_a_stdio_server_is_mounted_with_plain_and_sealed_environment(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: E501
    seal(home, "raw-token", "s3cret")
    argv = ["mcp", "add", "raw", "--env", "RAW_REQUIRE=s3cret", "--env-secret", "RAW_TOKEN=raw-token", "--json"]
    code, out, _ = run(capsys, *argv, "--", *RAW)
    added = json.loads(out)
    assert code == 0 and added["tools"] == 4 and "error" not in added
    assert added["env"] == {"RAW_REQUIRE": "s3cret"} and added["envSecrets"] == {"RAW_TOKEN": "raw-token"}
    code, out, _ = run(capsys, "mcp", "list")
    assert code == 0 and out.startswith("raw\tstdio\tstored\t4 tools\t")
    code, out, _ = run(capsys, "mcp", "show", "raw", "--json")
    shown = json.loads(out)
    assert [t["name"] for t in shown["tools"]] == [
        "mcp__raw__grow",
        "mcp__raw__malformed",
        "mcp__raw__pid",
        "mcp__raw__rpc_error",
    ]
    assert all(t["cid"].startswith("bafy") for t in shown["tools"])
    assert "s3cret" not in json.dumps(shown["envSecrets"])
    code, out, _ = run(capsys, "mcp", "refresh", "raw", "--json")
    assert code == 0 and json.loads(out) == {"name": "raw", "added": [], "changed": [], "removed": [], "unchanged": 4}


def test_refusals_have_their_exit_codes(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "mcp", "add", "raw", "--no-list", "--", *RAW)[0] == 0
    code, _, err = run(capsys, "mcp", "add", "raw", "--no-list", "--", *RAW)
    assert code == 4 and "already mounted" in err
    code, _, err = run(capsys, "mcp", "add", "Bad_Name", "--", *RAW)
    assert code == 2 and "is not accepted" in err
    code, _, err = run(capsys, "mcp", "add", "both", "--url", "http://127.0.0.1:1/mcp", "--", *RAW)
    assert code == 2 and "not both" in err
    code, _, err = run(capsys, "mcp", "add", "none")
    assert code == 2 and "exactly one of a command" in err
    code, _, err = run(capsys, "mcp", "add", "sealed", "--env-secret", "K=missing", "--", *RAW)
    assert code == 3 and "No secret named 'missing'" in err
    assert run(capsys, "mcp", "show", "nope")[0] == 3
    assert run(capsys, "mcp", "remove", "nope")[0] == 3
    assert run(capsys, "mcp", "add", "gone", "--no-list", "--", str(home / "missing-binary"))[0] == 0
    code, out, _ = run(capsys, "mcp", "refresh", "gone")
    assert code == 1 and "MCP server gone is not running: its command was not found" in out
    code, out, _ = run(capsys, "mcp", "remove", "raw")
    assert code == 0 and out == "Unmounted MCP server raw.\n"
    code, out, _ = run(capsys, "mcp", "list", "--json")
    assert [r["name"] for r in json.loads(out)] == ["gone"]


def test_config_servers_are_listed_and_cannot_be_removed_by_the_cli(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = home / "config.toml"
    command = ", ".join(json.dumps(part) for part in RAW)
    config.write_text(f'[[mcp.servers]]\nname = "raw"\ncommand = [{command}]\ntimeout_s = 5\n')
    code, out, _ = run(capsys, "mcp", "list", "--json", "--config", str(config))
    assert code == 0 and [(r["name"], r["source"], r["timeoutS"]) for r in json.loads(out)] == [("raw", "config", 5)]
    code, _, err = run(capsys, "mcp", "remove", "raw", "--config", str(config))
    assert code == 4 and "defined in the config" in err
    code, _, err = run(capsys, "mcp", "add", "raw", "--config", str(config), "--", *RAW)
    assert code == 4


@pytest.mark.anyio
async def test_an_http_server_is_mounted_with_a_sealed_bearer_token(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The upstream here is another mcp-harness over Streamable HTTP that demands a token: its five verbs list."""
    other = Harness(load_settings(data_dir=tmp_path / "other"))
    http = HttpSettings(tokens=[TokenSettings(hash=token_hash("upstream-token"), label="owner")])
    seal(home, "up-token", "upstream-token")
    try:
        async with serving(http_app(build_server(other), host="127.0.0.1", http=http)) as base:
            argv = ["mcp", "add", "up", "--url", f"{base}/mcp", "--bearer-secret", "up-token", "--json"]
            code = await anyio.to_thread.run_sync(main, argv)
            added = json.loads(capsys.readouterr().out)
            assert code == 0 and added["tools"] == 5 and added["bearerSecret"] == "up-token"
            argv = ["mcp", "add", "nokey", "--url", f"{base}/mcp", "--header", "X-Test=1", "--json"]
            assert await anyio.to_thread.run_sync(main, argv) == 0
            refused = json.loads(capsys.readouterr().out)
            assert refused["headers"] == {"X-Test": "1"} and "nokey" in refused["error"]
    finally:
        other.close()
