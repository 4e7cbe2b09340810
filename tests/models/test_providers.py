"""Model providers: built-ins, config declarations, stored providers, pinned URLs, keys and the CLI."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest, Conflict
from mcp_harness.harness import Harness
from mcp_harness.models import TYPES
from tests.cli.clikit import run

KEY = "sk-test-0123456789abcdef-PLAINTEXT"


@pytest.fixture(autouse=True)
def _no_developer_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor the developer's config file (conftest.py's `_no_ambient_keys` keeps their keys out)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent/mcp-harness-tests")


def open_harness(data_dir: Path, **providers: dict[str, Any]) -> Harness:
    return Harness(load_settings(data_dir=data_dir, providers=providers or None))


@pytest.fixture
def configured(data_dir: Path) -> Iterator[Harness]:
    h = open_harness(
        data_dir,
        work={"type": "openai", "model": "gpt-5.2", "api_key_env": "WORK_OPENAI_KEY"},
        gpu={"type": "ollama", "base_url": "http://gpu.lan:11434"},
    )
    yield h
    h.close()


# -- built-ins and config -----------------------------------------------------------------------------------


def test_builtin_providers_exist_with_no_configuration(harness: Harness) -> None:
    assert [(p.name, p.type, p.source) for p in harness.providers.list()] == [
        ("scripted", "scripted", "builtin"),
        ("sampling", "sampling", "builtin"),
    ]
    assert harness.providers.require(harness.settings.agent.model_provider).type == "scripted"
    assert harness.providers.endpoint(harness.providers.require("sampling")).api_key is None


def test_config_providers_load_from_a_toml_file(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[providers.work]\ntype = "openai"\nmodel = "gpt-5.2"\n\n'
        '[providers.gem]\ntype = "google"\n\n'
        '[providers.vllm]\ntype = "custom"\nbase_url = "http://10.0.0.5:8000/v1/"\napi_key_env = "VLLM_KEY"\n',
        encoding="utf-8",
    )
    h = Harness(load_settings(config, data_dir=tmp_path / "data"))
    try:
        found = {p.name: (p.type, p.source, p.base_url, p.model) for p in h.providers.list()}
        assert found == {
            "scripted": ("scripted", "builtin", None, None),
            "sampling": ("sampling", "builtin", None, None),
            "work": ("openai", "config", "https://api.openai.com/v1", "gpt-5.2"),
            "gem": ("google", "config", "https://generativelanguage.googleapis.com/v1beta/openai", None),
            "vllm": ("custom", "config", "http://10.0.0.5:8000/v1", None),
        }
    finally:
        h.close()


def test_a_config_provider_wins_over_a_stored_one_of_the_same_name(data_dir: Path) -> None:
    h = open_harness(data_dir)
    h.providers.add("work", "ollama")
    h.close()
    h = open_harness(data_dir, work={"type": "anthropic"})
    try:
        assert h.providers.require("work").source == "config"
        assert [p.name for p in h.providers.list()].count("work") == 1
        assert h.providers.delete("work") is True  # the shadowed row can still be removed
        with pytest.raises(BadRequest):
            h.providers.delete("work")
    finally:
        h.close()


def test_config_may_give_the_builtin_scripted_provider_a_file_but_not_another_type(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text('["hello"]', encoding="utf-8")
    h = open_harness(tmp_path / "a", scripted={"type": "scripted", "file": str(replies)})
    try:
        assert h.providers.require("scripted").file == replies.resolve()
    finally:
        h.close()
    h = open_harness(tmp_path / "b", sampling={"type": "openai"})
    try:
        with pytest.raises(BadRequest, match=r"\[providers\.sampling\]"):
            _ = h.providers
    finally:
        h.close()


# -- URLs ----------------------------------------------------------------------------------------------------


def test_a_hosted_provider_keeps_its_pinned_url_whatever_is_stored_or_configured(data_dir: Path) -> None:
    h = open_harness(data_dir)
    try:
        with pytest.raises(BadRequest, match="custom") as refused:
            h.providers.add("evil", "openai", base_url="https://collector.example/v1", api_key=KEY.encode())
        assert "https://api.openai.com/v1" in refused.value.message
        assert h.providers.get("evil") is None
        same = h.providers.add("oai", "openai", base_url="https://api.openai.com/v1/")
        assert same.base_url == "https://api.openai.com/v1"
        # A row edited behind the harness's back still cannot redirect the key.
        with h.db.transaction() as conn:
            conn.execute("UPDATE providers SET base_url = 'https://collector.example/v1' WHERE name = 'oai'")
        assert h.providers.require("oai").base_url == "https://api.openai.com/v1"
    finally:
        h.close()
    h = open_harness(data_dir / "cfg", ant={"type": "anthropic", "base_url": "https://collector.example"})
    try:
        with pytest.raises(BadRequest, match=r"\[providers\.ant\].*always uses https://api\.anthropic\.com"):
            _ = h.providers
    finally:
        h.close()


def test_custom_requires_a_base_url_and_honours_it(harness: Harness) -> None:
    with pytest.raises(BadRequest, match="needs base_url"):
        harness.providers.add("mine", "custom")
    for bad in ("ftp://host/v1", "not a url", "https://user:pw@host/v1", "https://host/v1?key=1", "http://h:99999"):
        with pytest.raises(BadRequest):
            harness.providers.add("mine", "custom", base_url=bad)
    added = harness.providers.add("mine", "custom", base_url="https://llm.internal:8443/v1/", api_key_env="MINE_KEY")
    assert added.base_url == "https://llm.internal:8443/v1"
    assert harness.providers.require("mine").base_url == "https://llm.internal:8443/v1"


def test_ollama_defaults_to_localhost_and_honours_a_given_url(harness: Harness) -> None:
    assert harness.providers.add("local", "ollama").base_url == "http://127.0.0.1:11434/v1"
    assert harness.providers.add("gpu", "ollama", base_url="http://gpu.lan:11434").base_url == "http://gpu.lan:11434/v1"
    assert (
        harness.providers.add("proxied", "ollama", base_url="https://o.lan/api/v1").base_url == "https://o.lan/api/v1"
    )
    assert harness.providers.endpoint(harness.providers.require("local")).api_key is None


# -- keys ----------------------------------------------------------------------------------------------------


def test_keys_come_from_the_standard_or_the_declared_environment_variable(
    configured: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    providers = configured.providers
    oai = providers.add("oai", "openai")
    gem = providers.add("gem", "google")
    assert providers.key_source(oai).describe() == "env OPENAI_API_KEY (unset)"
    with pytest.raises(BadRequest, match="OPENAI_API_KEY"):
        providers.endpoint(oai)
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert providers.key_source(oai).describe() == "env OPENAI_API_KEY (set)"
    endpoint = providers.endpoint(oai)
    assert (endpoint.base_url, endpoint.api_key) == ("https://api.openai.com/v1", "from-env")
    assert "from-env" not in repr(endpoint)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    assert providers.api_key(gem) == "google-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    assert providers.api_key(gem) == "gemini-key"
    work = providers.require("work")
    assert providers.api_key(work) is None  # its declared variable, not OPENAI_API_KEY
    monkeypatch.setenv("WORK_OPENAI_KEY", "work-key")
    assert providers.api_key(work) == "work-key"
    assert providers.key_source(work).describe() == "env WORK_OPENAI_KEY (set)"


def test_key_settings_are_refused_where_the_type_takes_none(harness: Harness, tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="takes no API key"):
        harness.providers.add("s", "sampling", api_key=b"k")
    with pytest.raises(BadRequest, match="takes no API key"):
        harness.providers.add("s", "scripted", api_key_env="SOME_KEY")
    with pytest.raises(BadRequest, match="takes no base_url"):
        harness.providers.add("s", "sampling", base_url="http://127.0.0.1:1")
    with pytest.raises(BadRequest, match="environment variable"):
        harness.providers.add("s", "openai", api_key_env="NOT-A-VAR")
    with pytest.raises(BadRequest, match="empty"):
        harness.providers.add("s", "openai", api_key=b" \n")


# -- names, types, files ---------------------------------------------------------------------------------------


def test_require_names_the_providers_that_exist(configured: Harness) -> None:
    with pytest.raises(BadRequest) as refused:
        configured.providers.require("nope")
    assert refused.value.message == (
        "No model provider named 'nope'. Providers: scripted, sampling, work, gpu. Add one with "
        "`mcp-harness provider add` or [providers.nope] in the config."
    )


def test_an_agent_definition_must_name_an_existing_provider(configured: Harness) -> None:
    unknown = normalize_definition({"name": "a", "systemPrompt": "p", "modelProvider": "nope", "model": "m"})
    with pytest.raises(BadRequest, match="No model provider named 'nope'"):
        configured.check_definition(unknown)
    configured.check_definition(
        normalize_definition({"name": "a", "systemPrompt": "p", "modelProvider": "work", "model": "m"})
    )


def test_names_clashing_with_builtin_config_or_stored_providers_conflict(configured: Harness) -> None:
    for name in ("scripted", "sampling", "work"):
        with pytest.raises(Conflict):
            configured.providers.add(name, "ollama")
    configured.providers.add("mine", "ollama")
    with pytest.raises(Conflict, match="already exists"):
        configured.providers.add("mine", "ollama")


def test_bad_types_and_names_are_refused_with_what_is_accepted(harness: Harness) -> None:
    with pytest.raises(BadRequest) as refused:
        harness.providers.add("x", "gpt")
    assert all(t in refused.value.message for t in TYPES)
    for bad in ("", "Upper", "-dash", "a" * 65, "sp ace", "dot.ted"):
        with pytest.raises(BadRequest, match="name"):
            harness.providers.add(bad, "ollama")


def test_a_scripted_file_must_exist_and_hold_replies(harness: Harness, tmp_path: Path) -> None:
    missing, broken, wrong, good = (tmp_path / n for n in ("missing.json", "broken.json", "wrong.json", "good.json"))
    broken.write_text("[1,", encoding="utf-8")
    wrong.write_text('{"reply": "hi"}', encoding="utf-8")
    good.write_text('{"replies": [{"text": "hi"}]}', encoding="utf-8")
    for path, why in ((missing, "cannot read"), (broken, "not valid JSON"), (wrong, "array of replies")):
        with pytest.raises(BadRequest, match=why):
            harness.providers.add("demo", "scripted", file=path)
    with pytest.raises(BadRequest, match="only a scripted provider"):
        harness.providers.add("demo", "ollama", file=good)
    assert harness.providers.add("demo", "scripted", file=good).file == good.resolve()
    assert harness.providers.require("demo").file == good.resolve()


def test_deleting_refuses_builtin_and_config_providers(configured: Harness) -> None:
    with pytest.raises(BadRequest, match="built in"):
        configured.providers.delete("scripted")
    with pytest.raises(BadRequest, match=r"\[providers\.work\]"):
        configured.providers.delete("work")
    assert configured.providers.delete("never-added") is False
    configured.providers.add("mine", "ollama")
    assert configured.providers.delete("mine") is True
    assert configured.providers.get("mine") is None


# -- sealed keys (needs mcp_harness.store.secrets) --------------------------------------------------------------


def _raw_db_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data_dir.glob("harness.db*") if p.is_file())


def test_an_added_key_is_sealed_and_never_stored_in_plaintext(data_dir: Path) -> None:
    h = open_harness(data_dir)
    try:
        added = h.providers.add("oai", "openai", api_key=(KEY + "\n").encode())
        assert added.api_key_secret == "provider-oai"
        assert h.secrets.find(h.account_id, "provider-oai") is not None
        assert h.providers.api_key(added) == KEY
        assert h.providers.key_source(added).describe() == "secret provider-oai"
        assert KEY.encode() not in _raw_db_bytes(data_dir)
    finally:
        h.close()
    assert KEY.encode() not in _raw_db_bytes(data_dir)


def test_the_cli_adds_lists_and_deletes_without_ever_printing_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    d = str(tmp_path / "data")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((KEY + "\n").encode())))
    code, out, err = run(capsys, "provider", "add", "oai", "--type", "openai", "--api-key-stdin", "--data-dir", d)
    assert code == 0, err
    assert out == "Added provider oai (openai at https://api.openai.com/v1); key: secret provider-oai.\n"
    code, out, err = run(capsys, "provider", "add", "lan", "--type", "custom", "--base-url", "http://10.1.1.1/v1",
                         "--api-key-env", "LAN_KEY", "--model", "qwen3", "--data-dir", d)  # fmt: skip
    assert code == 0, err
    code, text, _ = run(capsys, "provider", "list", "--data-dir", d)
    code, listed, _ = run(capsys, "provider", "list", "--json", "--data-dir", d)
    assert KEY not in text + listed
    assert "oai\topenai\tstored\thttps://api.openai.com/v1\tkey: secret provider-oai\n" in text
    rows = {r["name"]: r for r in json.loads(listed)}
    assert rows["lan"]["key"] == "env LAN_KEY (unset)" and rows["lan"]["model"] == "qwen3"
    assert list(rows) == ["scripted", "sampling", "lan", "oai"]
    code, _, err = run(capsys, "provider", "add", "x", "--type", "openai", "--base-url", "https://e.example",
                       "--data-dir", d)  # fmt: skip
    assert code == 2 and "use type 'custom'" in err
    code, _, err = run(capsys, "provider", "delete", "scripted", "--data-dir", d)
    assert code == 2 and "built in" in err
    code, out, _ = run(capsys, "provider", "delete", "oai", "--data-dir", d)
    assert out == "Deleted provider oai.\n"
    h = open_harness(Path(d))
    try:
        assert h.secrets.find(h.account_id, "provider-oai") is None
    finally:
        h.close()
    code, _, err = run(capsys, "provider", "delete", "oai", "--data-dir", d)
    assert code == 3 and "No stored provider named 'oai'" in err


def test_the_cli_prompts_for_a_key_and_refuses_an_empty_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    d = str(tmp_path / "data")
    monkeypatch.setattr("getpass.getpass", lambda prompt: KEY)
    code, out, err = run(capsys, "provider", "add", "ant", "--type", "anthropic", "--api-key-prompt", "--data-dir", d)
    assert code == 0, err
    assert KEY not in out + err and "secret provider-ant" in out
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    code, _, err = run(capsys, "provider", "add", "oai", "--type", "openai", "--api-key-stdin", "--data-dir", d)
    assert code == 2 and "read no key" in err
    h = open_harness(Path(d))
    try:
        assert h.providers.api_key(h.providers.require("ant")) == KEY
        assert h.providers.get("oai") is None
    finally:
        h.close()
