"""Ed25519 keys and account ids, the master key, sealed secrets, signing identities, their CLI and `~/self`."""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_harness.cli import main
from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.errors import BadRequest, Conflict, NotFound, StorageError, TooLarge
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import (
    IDENTITY_KIND,
    check_signing_keys,
    create_identity,
    delete_identity,
    import_identity,
    list_identities,
    load_keypair,
    parse_seed,
    update_identity,
)
from mcp_harness.identity.keys import KeyPair, account_id, public_key_of, verify
from mcp_harness.identity.sealing import MASTER_KEY_ENV, load_master_key, parse_master_key
from tests.conftest import call

# HYPERMEDIA §2: Seed's SLIP-10 test vector seed (core/identity_test.go) and the account id it gives.
VECTOR_SEED = bytes.fromhex("0dd692e7e203e73ef684b767e35396472c73c030593b6c1d05792c09331fb1fa")
VECTOR_ACCOUNT = "z6MkotYPjX4nWbLr8EES57Tma5sGksdaccUB7c1BdrJA6tQt"
VECTOR_NAME = "hm-account-z6MkotYPjX4nWbLr"
# RFC 8032 §7.1, TEST 1 (empty message).
RFC_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)
SECRET_VALUE = b"sk-test-7f3a9c1e5b2d4f608a1c3e5b7d9f0a2c"


@pytest.fixture(autouse=True)
def no_env_master_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/nonexistent/mcp-harness-tests")  # the developer's config stays out
    monkeypatch.delenv("MCP_HARNESS_CONFIG", raising=False)


def forms(secret: bytes) -> list[bytes]:
    """Every spelling of a secret that must never reach a file or a log: raw, hex, base64."""
    b64 = base64.b64encode(secret)
    return [
        secret,
        secret.hex().encode(),
        secret.hex().upper().encode(),
        b64,
        b64.rstrip(b"="),
        base64.urlsafe_b64encode(secret).rstrip(b"="),
    ]


def reopen(data_dir: Path) -> Harness:
    return Harness(load_settings(data_dir=data_dir))


# -- keys ------------------------------------------------------------------------------------------------------


def test_account_id_of_the_hypermedia_vector_seed() -> None:
    pair = KeyPair.from_seed(VECTOR_SEED)
    assert pair.account_id == VECTOR_ACCOUNT == account_id(pair.public_key)
    assert public_key_of(VECTOR_ACCOUNT) == pair.public_key
    assert pair.principal == b"\xed\x01" + pair.public_key
    assert VECTOR_SEED.hex() not in repr(pair) and VECTOR_ACCOUNT in repr(pair)


def test_signing_matches_rfc8032_and_verifies() -> None:
    pair = KeyPair.from_seed(RFC_SEED)
    assert pair.public_key == RFC_PUBLIC
    assert pair.sign(b"") == RFC_SIGNATURE
    assert verify(RFC_PUBLIC, b"", RFC_SIGNATURE)
    assert not verify(RFC_PUBLIC, b"x", RFC_SIGNATURE)
    assert not verify(RFC_PUBLIC, b"", RFC_SIGNATURE[:-1] + bytes([RFC_SIGNATURE[-1] ^ 1]))
    assert not verify(RFC_PUBLIC[:31], b"", RFC_SIGNATURE) and not verify(RFC_PUBLIC, b"", RFC_SIGNATURE[:63])


def test_generated_keys_round_trip() -> None:
    pair = KeyPair.generate()
    assert KeyPair.from_seed(pair.seed) == pair and KeyPair.generate() != pair
    assert pair.account_id.startswith("z6Mk") and len(pair.account_id) == 48
    assert public_key_of(pair.account_id) == pair.public_key
    assert verify(pair.public_key, b"blob", pair.sign(b"blob"))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "z",
        VECTOR_ACCOUNT[1:],  # no multibase prefix
        VECTOR_ACCOUNT[:-1],
        VECTOR_ACCOUNT[:-1] + "0",  # '0' is not a base58btc digit
        "z" + "1" * 47,
        "zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme",  # a secp256k1 key, not Ed25519
    ],
)
def test_public_key_of_accepts_only_ed25519_account_ids(text: str) -> None:
    with pytest.raises(BadRequest) as refused:
        public_key_of(text)
    assert "z6Mk" in refused.value.message


def test_seeds_and_public_keys_must_be_32_bytes() -> None:
    for bad in (b"", b"\x00" * 31, b"\x00" * 33):
        with pytest.raises(BadRequest):
            KeyPair.from_seed(bad)
        with pytest.raises(BadRequest):
            account_id(bad)


# -- the master key --------------------------------------------------------------------------------------------


def test_master_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    first = load_master_key(tmp_path, create=True)
    path = tmp_path / "master.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stat().st_size == 32
    before = path.read_bytes()
    second = load_master_key(tmp_path, create=True)
    assert path.read_bytes() == before
    assert second.open(first.seal(b"hello")) == b"hello"
    assert not [p for p in tmp_path.iterdir() if p.name != "master.key"], "no temporary file is left behind"
    assert before.hex() not in repr(first)


def test_a_master_key_other_users_can_read_is_refused_with_advice(tmp_path: Path) -> None:
    load_master_key(tmp_path, create=True)
    (tmp_path / "master.key").chmod(0o644)
    with pytest.raises(StorageError) as refused:
        load_master_key(tmp_path, create=True)
    assert "chmod 600" in refused.value.message and "0644" in refused.value.message


def test_a_master_key_file_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_bytes(b"\x01" * 16)
    path.chmod(0o600)
    with pytest.raises(StorageError, match="16 bytes"):
        load_master_key(tmp_path, create=True)


def test_env_master_key_accepts_hex_and_base64(tmp_path: Path) -> None:
    key = os.urandom(32)
    spellings = [
        key.hex(),
        key.hex().upper(),
        f"  {key.hex()}\n",
        base64.b64encode(key).decode(),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
    ]
    sealed = load_master_key(tmp_path, create=True, environ={MASTER_KEY_ENV: spellings[0]}).seal(b"v")
    for text in spellings:
        assert parse_master_key(text) == key
        assert load_master_key(tmp_path, create=True, environ={MASTER_KEY_ENV: text}).open(sealed) == b"v"
    assert not (tmp_path / "master.key").exists(), "an environment key never creates a key file"


@pytest.mark.parametrize("text", ["short", "g" * 64, base64.b64encode(b"x" * 31).decode(), "00" * 33, "!" * 44])
def test_malformed_env_master_keys_name_the_accepted_forms(text: str, tmp_path: Path) -> None:
    with pytest.raises(BadRequest) as refused:
        load_master_key(tmp_path, create=True, environ={MASTER_KEY_ENV: text})
    assert "64 hex characters" in refused.value.message and "base64" in refused.value.message
    assert text not in refused.value.message


# -- sealed secrets --------------------------------------------------------------------------------------------


def test_secrets_round_trip_without_ever_showing_the_value(harness: Harness) -> None:
    store, acct = harness.secrets, harness.account_id
    record = store.create(acct, "openai:work", SECRET_VALUE, metadata={"note": "team key"})
    assert record.name == "openai:work" and record.kind == "secret" and record.metadata == {"note": "team key"}
    assert set(record.to_json()) == {"name", "kind", "metadata", "createdAt", "updatedAt"}
    assert store.get_value(acct, "openai:work") == SECRET_VALUE
    with pytest.raises(Conflict):
        store.create(acct, "openai:work", b"other")
    replaced = store.set(acct, "openai:work", b"rotated")
    assert replaced.created_at == record.created_at and store.get_value(acct, "openai:work") == b"rotated"
    with pytest.raises(Conflict, match="not overwritten"):
        store.set(acct, "openai:work", b"x", kind="token")
    store.set(acct, "b", b"2", kind="token")
    assert [r.name for r in store.list(acct)] == ["b", "openai:work"]
    assert [r.name for r in store.list(acct, kind="token")] == ["b"]
    assert store.delete(acct, "b") and not store.delete(acct, "b") and store.find(acct, "b") is None
    with pytest.raises(NotFound) as missing:
        store.get_value(acct, "b")
    assert "mcp-harness secret list" in missing.value.message


@pytest.mark.parametrize("name", ["", "a b", "x" * 129, "naïve", "a/b", "line\nbreak"])
def test_secret_names_follow_the_rules(harness: Harness, name: str) -> None:
    with pytest.raises(BadRequest, match=r"letters, digits and \. _ : -"):
        harness.secrets.set(harness.account_id, name, b"v")


def test_empty_and_oversized_values_are_refused(harness: Harness) -> None:
    with pytest.raises(BadRequest):
        harness.secrets.set(harness.account_id, "a", b"")
    with pytest.raises(TooLarge):
        harness.secrets.set(harness.account_id, "a", b"x" * (64 * 1024 + 1))
    harness.secrets.set(harness.account_id, "a", b"x" * (64 * 1024))


def test_listing_needs_no_master_key(data_dir: Path) -> None:
    h = reopen(data_dir)
    h.secrets.set(h.account_id, "a", SECRET_VALUE)
    h.close()
    (data_dir / "master.key").unlink()
    h = reopen(data_dir)
    try:
        assert [r.name for r in h.secrets.list(h.account_id)] == ["a"]
        assert h.secrets.find(h.account_id, "a") is not None
    finally:
        h.close()


def test_a_wrong_master_key_is_refused_with_advice_never_garbage(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MASTER_KEY_ENV, os.urandom(32).hex())
    h = reopen(data_dir)
    h.secrets.set(h.account_id, "a", SECRET_VALUE)
    h.close()
    monkeypatch.setenv(MASTER_KEY_ENV, os.urandom(32).hex())
    h = reopen(data_dir)
    try:
        for attempt in (lambda: h.secrets.get_value(h.account_id, "a"), lambda: h.secrets.set(h.account_id, "b", b"v")):
            with pytest.raises(StorageError) as refused:
                attempt()
            assert "master.key" in refused.value.message and MASTER_KEY_ENV in refused.value.message
        assert [r.name for r in h.secrets.list(h.account_id)] == ["a"], "nothing was written under the wrong key"
    finally:
        h.close()
    with sqlite3.connect(data_dir / "harness.db") as conn:
        conn.execute("DELETE FROM _harness_key_check")
    h = reopen(data_dir)
    try:
        with pytest.raises(StorageError, match="not the key"):
            h.secrets.set(h.account_id, "b", b"v")
        with h.db.reading() as conn:
            assert conn.execute("SELECT COUNT(*) FROM _harness_key_check").fetchone()[0] == 0, "a wrong key is no proof"
    finally:
        h.close()


def test_a_missing_master_key_after_secrets_exist_is_refused_not_replaced(data_dir: Path) -> None:
    h = reopen(data_dir)
    h.secrets.set(h.account_id, "a", SECRET_VALUE)
    h.close()
    key_file = data_dir / "master.key"
    saved = key_file.read_bytes()
    key_file.unlink()
    h = reopen(data_dir)
    try:
        with pytest.raises(StorageError) as refused:
            h.secrets.get_value(h.account_id, "a")
        assert "missing" in refused.value.message and "Restore" in refused.value.message
        assert MASTER_KEY_ENV in refused.value.message
        assert not key_file.exists(), "no new key may be made next to secrets it cannot open"
    finally:
        h.close()
    key_file.write_bytes(saved)
    key_file.chmod(0o600)
    h = reopen(data_dir)
    try:
        assert h.secrets.get_value(h.account_id, "a") == SECRET_VALUE
    finally:
        h.close()


def test_a_sealed_value_copied_to_another_row_does_not_open_there(harness: Harness) -> None:
    harness.secrets.set(harness.account_id, "api", SECRET_VALUE)
    harness.secrets.set(harness.account_id, "other", b"decoy")
    with harness.db.transaction() as conn:
        conn.execute("UPDATE secrets SET sealed = (SELECT sealed FROM secrets WHERE name = 'api') WHERE name = 'other'")
    with pytest.raises(StorageError, match="sealed for another secret"):
        harness.secrets.get_value(harness.account_id, "other")


def test_the_database_never_holds_a_secret_or_seed_in_any_spelling(data_dir: Path) -> None:
    h = reopen(data_dir)
    try:
        created = create_identity(h, "Fresh")
        seeds = [load_keypair(h, created.name).seed, VECTOR_SEED]
        import_identity(h, VECTOR_SEED, "Vector")
        h.secrets.set(h.account_id, "api", SECRET_VALUE)
        files = [data_dir / "harness.db", data_dir / "harness.db-wal"]
        assert files[1].exists(), "the check must see the write-ahead log, where fresh writes land"
        snapshots = [f.read_bytes() for f in files]
    finally:
        h.close()
    snapshots.append((data_dir / "harness.db").read_bytes())  # after the close-time checkpoint
    for secret in [*seeds, SECRET_VALUE]:
        for spelling in forms(secret):
            assert all(spelling not in blob for blob in snapshots), spelling


def test_logs_never_carry_a_secret_or_seed(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    h = reopen(data_dir)
    try:
        created = create_identity(h, "Fresh")
        imported = import_identity(h, VECTOR_SEED, "Vector")
        h.secrets.set(h.account_id, "api", SECRET_VALUE)
        assert h.secrets.get_value(h.account_id, "api") == SECRET_VALUE
        fresh_seed = load_keypair(h, created.name).seed
        load_keypair(h, imported.name).sign(b"blob")
        update_identity(h, imported.name, "Renamed")
        master = (data_dir / "master.key").read_bytes()
    finally:
        h.close()
    assert any(r.name == "mcp_harness.store.secrets" for r in caplog.records), "the cycle logged at DEBUG"
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records).encode()
    for secret in (fresh_seed, VECTOR_SEED, SECRET_VALUE, master):
        for spelling in forms(secret):
            assert spelling not in logged


# -- signing identities ----------------------------------------------------------------------------------------


def test_import_derives_the_account_and_a_second_import_conflicts(harness: Harness) -> None:
    imported = import_identity(harness, VECTOR_SEED, "Vector")
    assert (imported.name, imported.account_id, imported.label) == (VECTOR_NAME, VECTOR_ACCOUNT, "Vector")
    record = harness.secrets.find(harness.account_id, VECTOR_NAME)
    assert record is not None and record.kind == IDENTITY_KIND
    assert record.metadata == {
        "kind": IDENTITY_KIND,
        "accountId": VECTOR_ACCOUNT,
        "label": "Vector",
        "importedBy": "user",
    }
    assert load_keypair(harness, VECTOR_NAME).seed == VECTOR_SEED
    with pytest.raises(Conflict) as again:
        import_identity(harness, VECTOR_SEED, "Twice")
    assert again.value.status == 409 and VECTOR_ACCOUNT in again.value.message
    with pytest.raises(BadRequest):
        import_identity(harness, b"\x00" * 31)


def test_create_lists_newest_first_with_a_default_label(harness: Harness) -> None:
    first = create_identity(harness, "First")
    second = create_identity(harness)
    assert second.label == f"Agent account {second.account_id[:10]}"
    assert first.account_id != second.account_id and first.name == f"hm-account-{first.account_id[:16]}"
    harness.secrets.set(harness.account_id, "plain", b"v")
    listed = list_identities(harness)
    assert {i.name for i in listed} == {first.name, second.name}
    assert listed == sorted(listed, key=lambda i: (i.created_at, i.name), reverse=True)


def test_update_relabels_by_name_or_account_id(harness: Harness) -> None:
    imported = import_identity(harness, VECTOR_SEED, "Vector")
    assert update_identity(harness, VECTOR_ACCOUNT, "By account").label == "By account"
    updated = update_identity(harness, imported.name, "By name")
    assert updated.label == "By name" and updated.account_id == VECTOR_ACCOUNT
    harness.secrets.set(harness.account_id, "plain", b"v")
    for unknown in ("plain", "hm-account-z6MkNOPE", VECTOR_ACCOUNT[:16] + "x" * 32):
        with pytest.raises(NotFound):
            update_identity(harness, unknown, "x")


def test_delete_removes_only_the_secret(harness: Harness) -> None:
    imported = import_identity(harness, VECTOR_SEED, "Vector")
    harness.secrets.set(harness.account_id, "plain", b"v")
    agent = harness.agent()
    definition = normalize_definition({**agent.definition.to_json(), "signingKey": imported.name})
    harness.agents.update(agent.id, definition)
    assert delete_identity(harness, VECTOR_ACCOUNT)
    assert harness.secrets.find(harness.account_id, imported.name) is None
    assert harness.secrets.get_value(harness.account_id, "plain") == b"v"
    assert harness.agents.get(agent.id).definition.signing_key == imported.name, "agents are not rewritten"
    with pytest.raises(BadRequest, match="Signing key not found"):
        check_signing_keys(harness, definition)
    with pytest.raises(NotFound):
        delete_identity(harness, imported.name)


def test_definitions_may_name_only_existing_identities(harness: Harness) -> None:
    first = create_identity(harness, "First")
    second = import_identity(harness, VECTOR_SEED, "Vector")
    harness.secrets.set(harness.account_id, "plain", b"v")
    base = harness.agent().definition.to_json()
    check_signing_keys(harness, normalize_definition({**base, "signingKey": first.name, "signingKeys": [second.name]}))
    check_signing_keys(harness, normalize_definition(base))
    for bad in ({"signingKey": "hm-account-unknown"}, {"signingKeys": [first.name, "plain"]}):
        with pytest.raises(BadRequest) as refused:
            check_signing_keys(harness, normalize_definition({**base, **bad}))
        message = refused.value.message
        assert refused.value.status == 400 and "Signing key not found" in message
        assert first.name in message and VECTOR_ACCOUNT in message and "mcp-harness identity create" in message


def test_parse_seed_accepts_raw_hex_and_base64() -> None:
    for given in (
        VECTOR_SEED,
        VECTOR_SEED.hex().encode() + b"\n",
        VECTOR_SEED.hex().upper().encode(),
        base64.b64encode(VECTOR_SEED),
        base64.urlsafe_b64encode(VECTOR_SEED).rstrip(b"="),
    ):
        assert parse_seed(given) == VECTOR_SEED
    for bad in (b"", b"\x00" * 33, b"zz" * 32, base64.b64encode(b"x" * 31), "é".encode() * 40):
        with pytest.raises(BadRequest, match="64 hex characters"):
            parse_seed(bad)


@pytest.mark.anyio
async def test_self_lists_the_identities_the_agent_may_sign_as(client: Client, harness: Harness) -> None:
    imported = import_identity(harness, VECTOR_SEED, "Vector")
    created = create_identity(harness, "Fresh")
    agent = harness.agent()
    raw = {**agent.definition.to_json(), "signingKey": imported.name, "signingKeys": [created.name, "hm-account-gone"]}
    harness.agents.update(agent.id, normalize_definition(raw))
    data = await call(client, "read", {"address": "~/self"})
    assert data["signingKeys"] == [
        {"name": VECTOR_NAME, "label": "Vector", "accountId": VECTOR_ACCOUNT},
        {"name": created.name, "label": "Fresh", "accountId": created.account_id},
    ]
    result = await client.call_tool("read", {"address": "~/self"})
    text = result.content[0].text  # pyright: ignore[reportAttributeAccessIssue]
    assert f"- Vector: {VECTOR_ACCOUNT} (signing key `{VECTOR_NAME}`)" in text and created.account_id in text
    for spelling in forms(VECTOR_SEED):
        assert spelling.decode("latin-1") not in text


# -- command line ----------------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`cli(*argv, stdin=bytes)` runs the command on a fresh data dir and returns (exit code, stdout, stderr)."""

    def run(*argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = main([*argv, "--data-dir", str(tmp_path / "data")])
        out = capsys.readouterr()
        return code, out.out, out.err

    yield run


def test_cli_secret_set_list_delete(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("secret", "set", "openai", stdin=SECRET_VALUE + b"\n")[0] == 0
    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt: "typed-value")
    code, out, _ = cli("secret", "set", "typed", "--kind", "token")
    assert code == 0 and out == "Stored secret typed (token).\n"
    code, out, _ = cli("secret", "list")
    assert code == 0 and "openai\tsecret" in out and "typed\ttoken" in out and "typed-value" not in out
    code, out, _ = cli("secret", "list", "--json")
    assert [s["name"] for s in json.loads(out)] == ["openai", "typed"] and SECRET_VALUE.decode() not in out
    h = reopen(tmp_path / "data")
    try:
        assert h.secrets.get_value(h.account_id, "openai") == SECRET_VALUE, "one trailing newline is dropped"
        assert h.secrets.get_value(h.account_id, "typed") == b"typed-value"
    finally:
        h.close()
    assert cli("secret", "delete", "typed")[:2] == (0, "Deleted secret typed.\n")
    code, _, err = cli("secret", "delete", "typed")
    assert code == 3 and "No secret named 'typed'" in err


def test_cli_secret_set_never_takes_the_value_from_argv(cli: Any) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["secret", "set", "X", "value"])
    assert exited.value.code == 2
    code, _, err = cli("secret", "set", "X", stdin=b"\n")
    assert code == 2 and "No value" in err
    code, _, err = cli("secret", "set", "bad name", stdin=b"v")
    assert code == 2 and "invalid" in err
    code, _, err = cli("secret", "set", "X", "--kind", IDENTITY_KIND, stdin=b"v")
    assert code == 2 and "identity create" in err


def test_cli_identity_lifecycle(cli: Any, tmp_path: Path) -> None:
    code, out, _ = cli("identity", "create", "--label", "Fresh", "--json")
    created = json.loads(out)
    assert code == 0 and created["label"] == "Fresh" and created["accountId"].startswith("z6Mk")
    seed_file = tmp_path / "seed.bin"
    seed_file.write_bytes(VECTOR_SEED)
    code, out, _ = cli("identity", "import", "--label", "Vector", "--file", str(seed_file))
    assert code == 0 and out == f"Imported signing identity 'Vector': {VECTOR_ACCOUNT} (secret {VECTOR_NAME}).\n"
    code, _, err = cli("identity", "import", "--label", "Again", stdin=VECTOR_SEED.hex().encode() + b"\n")
    assert code == 4 and f"already on the server ({VECTOR_ACCOUNT})" in err
    code, _, err = cli("identity", "import", stdin=b"not a seed")
    assert code == 2 and "64 hex characters" in err
    code, out, _ = cli("identity", "list")
    assert code == 0 and f"{VECTOR_NAME}\t{VECTOR_ACCOUNT}\tVector" in out and created["name"] in out
    assert VECTOR_SEED.hex() not in out
    code, out, _ = cli("identity", "update", VECTOR_ACCOUNT, "--label", "Renamed", "--json")
    assert code == 0 and json.loads(out)["label"] == "Renamed"
    deleted = f"Deleted signing identity 'Fresh' ({created['accountId']}, secret {created['name']}).\n"
    assert cli("identity", "delete", created["name"])[:2] == (0, deleted)
    code, out, _ = cli("identity", "list", "--json")
    assert [i["label"] for i in json.loads(out)] == ["Renamed"]
    code, _, err = cli("identity", "delete", created["name"])
    assert code == 3 and "No signing identity" in err


def test_cli_identity_import_reads_a_base64_seed_from_stdin(cli: Any) -> None:
    code, out, _ = cli("identity", "import", stdin=base64.b64encode(VECTOR_SEED))
    assert code == 0 and f"'Agent account {VECTOR_ACCOUNT[:10]}'" in out


def test_cli_reports_refusals_on_stderr_with_the_not_found_exit_code(cli: Any) -> None:
    code, _, err = cli("identity", "update", "hm-account-nothing", "--label", "x")
    assert code == 3 and err.startswith("mcp-harness: No signing identity 'hm-account-nothing'")
