"""Issue 13, the first hour, through the real command (`python -m mcp_harness …` in a subprocess): a provider's
default model, checked grants and names, signing keys for agents, `.hmkey.json` export and import, the default
config file, one JSON shape, distinct exit codes, and no traceback when stdout closes early."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.callables.documents import validate_lambda
from mcp_harness.config import EXAMPLE_CONFIG, load_settings
from mcp_harness.harness import Harness

ROOT = Path(__file__).resolve().parents[2]
VECTOR_SEED = bytes.fromhex("0dd692e7e203e73ef684b767e35396472c73c030593b6c1d05792c09331fb1fa")
VECTOR_ACCOUNT = "z6MkotYPjX4nWbLr8EES57Tma5sGksdaccUB7c1BdrJA6tQt"


class Cli:
    """`cli(*argv)` runs `python -m mcp_harness` on one data dir and config home; returns (code, stdout, stderr)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")},
            "MCP_HARNESS_DATA_DIR": str(home / "data"),
            "MCP_HARNESS_MASTER_KEY": "11" * 32,
            "XDG_CONFIG_HOME": str(home / "xdg"),
        }

    def __call__(self, *argv: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> tuple[int, str, str]:
        done = subprocess.run(
            [sys.executable, "-m", "mcp_harness", *argv],
            input=stdin,
            capture_output=True,
            env={**self.env, **(env or {})},
            cwd=self.home,
            timeout=60,
        )
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    def ok(self, *argv: str, stdin: bytes = b"") -> str:
        code, out, err = self(*argv, stdin=stdin)
        assert code == 0, err
        return out

    def json(self, *argv: str) -> Any:
        return json.loads(self.ok(*argv, "--json"))

    def refused(self, code: int, *argv: str) -> str:
        """The one-line stderr of a command that must exit with `code` and print nothing on stdout."""
        got, out, err = self(*argv)
        assert (got, out) == (code, ""), (got, out, err)
        assert err.count("\n") == 1 and err.startswith("mcp-harness: ") and "Traceback" not in err, err
        return err

    def harness(self) -> Harness:
        return Harness(load_settings(data_dir=self.home / "data"))


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def test_a_new_agent_takes_its_providers_default_model(cli: Cli) -> None:
    cli.ok("provider", "add", "fake", "--type", "custom", "--base-url", "http://127.0.0.1:9/v1", "--model", "fake-1")
    assert cli.json("agent", "create", "gpt", "--model-provider", "fake")["definition"]["model"] == "fake-1"
    assert cli.json("agent", "update", "gpt", "--model", "fake-2")["definition"]["model"] == "fake-2"
    cli.ok("provider", "add", "bare", "--type", "custom", "--base-url", "http://127.0.0.1:9/v1")
    err = cli.refused(2, "agent", "create", "other", "--model-provider", "bare")
    assert "no default model" in err and "--model" in err and "provider add bare" in err
    err = cli.refused(2, "agent", "update", "gpt", "--model-provider", "bare")
    assert "no default model" in err
    assert cli.json("agent", "update", "gpt", "--model-provider", "scripted")["definition"]["model"] == "scripted"
    # The default agent from [agent] with no model takes its provider's default too.
    config = cli.home / "xdg" / "mcp-harness" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[agent]\nmodel_provider = "lab"\n[providers.lab]\ntype = "ollama"\nmodel = "qwen3"\n')
    h = Harness(load_settings(config, data_dir=cli.home / "data"))
    try:
        assert h.agent().definition.model == "qwen3"
    finally:
        h.close()


def test_grant_names_are_checked(cli: Cli) -> None:
    err = cli.refused(2, "agent", "create", "typo", "--tools", "exeute,publsh")
    assert "exeute, publsh" in err and "search, web_search, execute, publish" in err and "execute_code" in err
    tools = cli.json("agent", "create", "legacy", "--tools", "execute_code,write,search")["definition"]["tools"]
    assert tools == ["execute_code", "write", "search"]
    assert "exeute" in cli.refused(2, "agent", "update", "legacy", "--tools", "exeute")
    h = cli.harness()
    try:  # a tool the agent authored is a grant name too
        doc = validate_lambda("weather", {"description": "The weather.", "source": "def main(i): return i"})
        h.tools.save_lambda(h.agents.find(h.account_id, "legacy").id, doc)  # pyright: ignore[reportOptionalMemberAccess]
    finally:
        h.close()
    assert "this agent's tools: weather" in cli.refused(2, "agent", "update", "legacy", "--tools", "wether")
    assert cli.json("agent", "update", "legacy", "--tools", "weather,search")["definition"]["tools"] == [
        "weather",
        "search",
    ]
    config = cli.home / "bad.toml"
    config.write_text('[agent]\ntools = ["exeute"]\n')
    assert "exeute" in cli.refused(2, "agent", "create", "x", "--config", str(config))
    h = Harness(load_settings(config, data_dir=cli.home / "data"))
    try:
        with pytest.raises(Exception, match=r"\[agent\]: Unknown tool grant: exeute"):
            h.agent()
    finally:
        h.close()


def test_agents_get_signing_keys_by_label_account_or_secret_name(cli: Cli) -> None:
    first = cli.json("identity", "create", "--label", "Publisher")
    seed = cli.home / "seed.hex"
    seed.write_text(VECTOR_SEED.hex())
    second = cli.json("identity", "import", "--label", "Vector", "--file", str(seed))
    made = cli.json("agent", "create", "pub", "--signing-key", "Publisher", "--signing-key", VECTOR_ACCOUNT)
    assert made["definition"]["signingKeys"] == [first["name"], second["name"]]
    assert f"signing keys: {first['name']}, {second['name']}" in cli.ok("agent", "show", "pub")
    removed = cli.json("agent", "update", "pub", "--remove-signing-key", "Publisher")
    assert removed["definition"]["signingKeys"] == [second["name"]]
    assert "signingKeys" not in cli.json("agent", "update", "pub", "--no-signing-keys")["definition"]
    assert cli.json("agent", "update", "pub", "--signing-key", first["name"])["definition"]["signingKeys"] == [
        first["name"]
    ]
    assert "No signing identity 'Nobody'" in cli.refused(3, "agent", "update", "pub", "--signing-key", "Nobody")
    # identity update and delete accept the label too.
    assert cli.json("identity", "update", "Vector", "--label", "Vec")["accountId"] == VECTOR_ACCOUNT
    assert cli.json("identity", "delete", "Vec")["accountId"] == VECTOR_ACCOUNT
    # [agent] signing_keys, by label, for the default agent.
    config = cli.home / "c.toml"
    config.write_text('[agent]\nsigning_keys = ["Publisher"]\n')
    h = Harness(load_settings(config, data_dir=cli.home / "data"))
    try:
        assert h.agent().definition.signing_keys == (first["name"],)
    finally:
        h.close()


def test_export_writes_a_private_hmkey_json_that_imports_elsewhere(cli: Cli, tmp_path: Path) -> None:
    seed = cli.home / "seed.bin"
    seed.write_bytes(VECTOR_SEED)
    cli.ok("identity", "import", "--label", "Vector", "--file", str(seed))
    out = cli.ok("identity", "export", "Vector")
    path = cli.home / f"{VECTOR_ACCOUNT}.hmkey.json"
    assert str(path.name) in out and stat.S_IMODE(path.stat().st_mode) == 0o600
    spellings = (VECTOR_SEED.hex(), base64.urlsafe_b64encode(VECTOR_SEED).decode().rstrip("="))
    assert not any(s in out for s in spellings), "the seed never reaches stdout unless asked"
    payload = json.loads(path.read_text())
    assert set(payload) == {"createTime", "publicKey", "keyB64", "profile"}
    assert payload["publicKey"] == VECTOR_ACCOUNT and payload["profile"] == {"name": "Vector"}
    assert base64.urlsafe_b64decode(payload["keyB64"] + "=") == VECTOR_SEED
    assert path.read_text().endswith("}\n") and payload["createTime"].endswith("Z")
    assert "already exists" in cli.refused(4, "identity", "export", VECTOR_ACCOUNT)
    assert json.loads(cli.ok("identity", "export", "Vector", "--file", "-"))["keyB64"] == payload["keyB64"]

    fresh = Cli(tmp_path / "elsewhere")
    fresh.home.mkdir()
    imported = fresh.json("identity", "import", "--file", str(path))
    assert (imported["accountId"], imported["label"]) == (VECTOR_ACCOUNT, "Vector")
    payload["publicKey"] = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"
    path.write_text(json.dumps(payload))
    err = fresh.refused(2, "identity", "import", "--file", str(path))
    assert "belongs to" in err and payload["keyB64"] not in err
    path.write_text(json.dumps({**payload, "encryption": {"kdf": "argon2id"}}))
    assert "password-encrypted" in fresh.refused(2, "identity", "import", "--file", str(path))


def test_the_cli_and_server_share_a_default_config_file(cli: Cli) -> None:
    target = cli.home / "xdg" / "mcp-harness" / "config.toml"
    assert cli.json("config", "path") == {"path": str(target), "source": "default", "exists": False}
    assert str(target) in cli.ok("config", "init")
    assert target.read_bytes() == EXAMPLE_CONFIG.read_bytes()
    assert "--force" in cli.refused(4, "config", "init")
    cli.ok("config", "init", "--force")
    with target.open("a") as f:
        f.write('\n[providers.lab]\ntype = "ollama"\nmodel = "qwen3"\n\n[[http.tokens]]\nhash = "sha256:' + "ab" * 32)
        f.write('"\n')
    listed = {p["name"]: p["source"] for p in cli.json("provider", "list")}
    assert listed.get("lab") == "config", "no --config needed: the default file is read"
    code, out, _ = cli("config", "show", "--json", "--data-dir", str(cli.home / "d2"), env={"MCP_HARNESS_AGENT": "bob"})
    shown = json.loads(out)
    assert code == 0 and shown["configFile"] == str(target) and shown["configSource"] == "default"
    rows = shown["settings"]
    assert rows["providers.lab.model"] == {"value": "qwen3", "source": "file"}
    assert rows["agent.name"] == {"value": "bob", "source": "env"}
    assert rows["data_dir"]["source"] == "flag" and rows["runs.max_agent_runs"]["source"] == "file"
    assert rows["agent.model"] == {"value": None, "source": "default"}
    assert "ab" * 32 not in out and "(hidden)" in out
    text = cli.ok("config", "show")
    assert f"# config file: {target} (default)" in text and "ab" * 32 not in text
    target.write_text("[agent]\nnmae = 1\n")
    err = cli.refused(2, "provider", "list")
    assert str(target) in err and str(EXAMPLE_CONFIG) in err and "config init" in err


def test_rough_edges(cli: Cli) -> None:
    prompt = cli.home / "prompt.md"
    prompt.write_text("# Role\n\nYou review **pull requests**.\n\n- be kind\n- be brief\n")
    cli.ok("agent", "create", "reviewer", "--system-prompt-file", str(prompt))
    shown = cli.ok("agent", "show", "reviewer")
    assert "    # Role" in shown and "    - be kind" in shown and "**pull requests**" in shown
    assert '"block"' not in shown and "Paragraph" not in shown
    assert "a-z 0-9" in cli.refused(2, "agent", "create", "Bad Name")
    assert "a-z 0-9" in cli.refused(2, "agent", "update", "reviewer", "--rename", "Bad Name")
    assert "No agent named 'nobody'" in cli.refused(3, "token", "new", "--agent", "nobody")
    token = cli.json("token", "new", "--agent", "reviewer", "--label", "laptop")
    assert token["entry"]["agent"] == "reviewer" and token["entry"]["hash"].startswith("sha256:")
    cli.ok("provider", "add", "lab", "--type", "ollama", "--model", "qwen3")
    cli.ok("agent", "update", "reviewer", "--model-provider", "lab")
    err = cli.refused(4, "provider", "delete", "lab")
    assert "reviewer" in err and "--force" in err and "agents" not in err
    assert cli.json("provider", "delete", "lab", "--force") == {"deleted": "lab", "agents": ["reviewer"]}


def test_one_json_shape_and_distinct_exit_codes(cli: Cli) -> None:
    cli.ok("agent", "create", "one")
    for argv in (("agent", "list"), ("sessions",), ("provider", "list"), ("secret", "list"), ("identity", "list")):
        assert isinstance(cli.json(*argv), list), argv
    for argv in (
        ("agent", "show", "one"),
        ("config", "path"),
        ("config", "show"),
        ("token", "new"),
        ("agent", "delete", "one"),
    ):
        assert isinstance(cli.json(*argv), dict), argv
    stored = json.loads(cli.ok("secret", "set", "k", "--json", stdin=b"value\n"))
    assert stored["name"] == "k" and "value" not in json.dumps(stored)
    assert cli.json("secret", "delete", "k") == {"deleted": "k"}
    code, out, _ = cli("doctor", "--json")
    assert code in (0, 1) and isinstance(json.loads(out)["checks"], list)
    assert cli("agent", "create")[0] == 2, "usage"
    assert cli("agent", "show", "ghost")[0] == 3, "not found"
    cli.ok("agent", "create", "two")
    assert cli("agent", "create", "two")[0] == 4, "conflict"
    assert "exit codes:" in cli.ok("--help") and "3    not found" in cli.ok("--help")


def test_a_closed_stdout_is_not_a_traceback(cli: Cli) -> None:
    for n in range(3):
        cli.ok("agent", "create", f"a{n}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_harness", "config", "show"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli.env,
        cwd=cli.home,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes: every write is EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == "", err
    shell = subprocess.run(
        f"{sys.executable} -m mcp_harness config show | head -1",
        shell=True,
        capture_output=True,
        env=cli.env,
        cwd=cli.home,
        timeout=60,
    )
    assert shell.stdout.decode().startswith("# config file:") and b"Traceback" not in shell.stderr
