"""`hm://` ids and versions, checked against the official Seed client's `unpackHmId` / `packHmId`.

The client runs once per module (tests/js/seed_oracle.mjs) with every case in one batch. It needs Node.js and
`tests/js/node_modules`, which `make test` installs; without them these tests fail rather than skip, because
agreeing with nothing would prove nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia.cid import cid_of
from mcp_harness.hypermedia.ids import ACCEPTED_FORM, HmId, pack_hm_id, parse_hm_id, parse_version, version_string
from mcp_harness.identity.keys import KeyPair
from tests.js_oracle import run_seed_oracle

ACCOUNT = KeyPair.from_seed(bytes(range(32))).account_id
OTHER = KeyPair.from_seed(bytes(32)).account_id
V1, V2 = sorted(str(cid_of(data)) for data in (b"one", b"two"))
TSID = "zQ3shXa8Q6wSZ8"
GATEWAY = "seed.hyper.media"

CORPUS = [
    f"hm://{ACCOUNT}",
    f"hm://{ACCOUNT}/",
    f"hm://{ACCOUNT}/notes",
    f"hm://{ACCOUNT}/notes/2024/plan",
    f"hm://{ACCOUNT}/notes/plan/",
    f"hm://{ACCOUNT}//a//b",
    f"hm://{ACCOUNT}/hello%20world",
    f"hm://{ACCOUNT}/notes?v={V1}",
    f"hm://{ACCOUNT}/notes?v={V1}.{V2}",
    f"hm://{ACCOUNT}/notes?v={V1}.{V2}&l",
    f"hm://{ACCOUNT}/notes?l&v={V1}",
    f"hm://{ACCOUNT}/notes?l",
    f"hm://{ACCOUNT}/notes?v={V1}&l=1",
    f"hm://{ACCOUNT}/notes?v=",
    f"hm://{ACCOUNT}/notes?v={V1}&v={V2}",
    f"hm://{ACCOUNT}/notes?v={V1}&panel=discussions",
    f"hm://{ACCOUNT}/a?x=1?v={V1}",
    f"hm://{ACCOUNT}/notes#blk",
    f"hm://{ACCOUNT}/notes#blk+",
    f"hm://{ACCOUNT}/notes#blk[3:9]",
    f"hm://{ACCOUNT}/notes?v={V1}#blk[0:12]",
    f"hm://{ACCOUNT}/notes?v={V2}&l#b-1_x+",
    f"hm://{ACCOUNT}#blk",
    f"hm://{ACCOUNT}/notes#",
    f"hm://{ACCOUNT}/:directory",
    f"hm://{ACCOUNT}/notes/:attributes",
    f"hm://{ACCOUNT}/:profile",
    f"hm://{ACCOUNT}/notes/:comments/{TSID}",
    f"hm://{ACCOUNT}/:comments/{OTHER}/{TSID}",
    f"hm://{OTHER}/{TSID}",
    f"https://{GATEWAY}/hm/{ACCOUNT}",
    f"https://{GATEWAY}/hm/{ACCOUNT}/notes?v={V1}#blk",
    f"https://{GATEWAY}/hm/{ACCOUNT}/notes/:directory",
    f"http://localhost:3000/hm/{ACCOUNT}/a/b/",
]

# Ids the client refuses too (unpackHmId returns null).
REFUSED_BY_BOTH = [
    ACCOUNT,
    f"ipfs://{V1}",
    "hm://",
    f"HM://{ACCOUNT}",
    f"https://{GATEWAY}/{ACCOUNT}/notes",
    f"https://{GATEWAY}/hm/download",
    f"https://{GATEWAY}/hm/profile/x",
]
# Ids the client reads as something, but that cannot name a resource; we refuse rather than guess.
REFUSED_HERE_ONLY = [
    "hm:///notes",
    f"https://{GATEWAY}/hm",
    f"hm://{ACCOUNT}/notes?v=notacid",
    f"hm://{ACCOUNT}/notes?v={V1}..{V2}",
    f"hm://{ACCOUNT}/a b",
    f"hm://{ACCOUNT}/a\tb",
    f"hm://{ACCOUNT}/notes#a#b",
    f"hm://{ACCOUNT}/notes#blk[3:",
    f"hm://{ACCOUNT}/notes#blk[x:1]",
    f"hm://{ACCOUNT}/notes#[1:2]",
    f"hm://{ACCOUNT}/notes#+",
]

PACK_CASES = [
    HmId(uid=ACCOUNT, path=()),
    HmId(uid=ACCOUNT, path=("notes", "plan")),
    HmId(uid=ACCOUNT, path=("", "notes", "")),
    HmId(uid=ACCOUNT, path=("notes",), version=V1, latest=False),
    HmId(uid=ACCOUNT, path=("notes",), version=f"{V1}.{V2}", latest=True),
    HmId(uid=ACCOUNT, path=("notes",), version=None, latest=False),
    HmId(uid=ACCOUNT, path=("notes",), block_ref="blk"),
    HmId(uid=ACCOUNT, path=("notes",), block_ref="blk", expanded=True),
    HmId(uid=ACCOUNT, path=("notes",), block_ref="blk", block_range=(2, 40)),
    HmId(uid=ACCOUNT, path=("notes",), block_ref="blk", block_range=(2, 40), expanded=True),
    HmId(uid=ACCOUNT, path=(), version=V2, latest=False, block_ref="b", block_range=(0, 0)),
    HmId(uid=ACCOUNT, path=("x",), block_range=(1, 2)),
    HmId(uid=ACCOUNT, path=("notes",), hostname=GATEWAY, scheme="https"),
]


def _js_hm_id(hm: HmId) -> dict[str, Any]:
    """The object `packHmId` takes for an `HmId`."""
    block_range: dict[str, Any] | None = None
    if hm.expanded:
        block_range = {"expanded": True}
    elif hm.block_range is not None:
        block_range = {"start": hm.block_range[0], "end": hm.block_range[1]}
    return {
        "uid": hm.uid,
        "path": list(hm.path),
        "version": hm.version,
        "latest": hm.latest,
        "blockRef": hm.block_ref,
        "blockRange": block_range,
        "hostname": hm.hostname,
        "scheme": hm.scheme,
    }


def _run_oracle(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return run_seed_oracle(commands)


QUIRK = f"hm://{ACCOUNT}/a/b/?v={V1}&l#x[1:2]"


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict[str, Any]]:
    """The client's answer per case, keyed `unpack:<text>`, `repack:<text>` (pack of unpack) and `pack:<index>`."""
    texts = CORPUS + REFUSED_BY_BOTH + REFUSED_HERE_ONLY + [QUIRK]
    keyed = [(f"unpack:{text}", {"op": "unpack", "id": text}) for text in texts]
    keyed += [(f"repack:{text}", {"op": "repack", "id": text}) for text in CORPUS]
    keyed += [(f"pack:{index}", {"op": "pack", "hmId": _js_hm_id(hm)}) for index, hm in enumerate(PACK_CASES)]
    return dict(zip([key for key, _ in keyed], _run_oracle([command for _, command in keyed]), strict=True))


def _as_js(hm: HmId) -> dict[str, Any]:
    """Our parse in the shape of `unpackHmId`'s result, with the client's empty path segments dropped."""
    block_range: dict[str, Any] | None = None
    if hm.block_range is not None:
        block_range = {"start": hm.block_range[0], "end": hm.block_range[1]}
    elif hm.block_ref is not None:
        block_range = {"expanded": hm.expanded}
    return {
        "id": hm.id,
        "uid": hm.uid,
        "path": list(hm.path),
        "version": hm.version,
        "blockRef": hm.block_ref,
        "blockRange": block_range,
        "hostname": hm.hostname,
        "latest": hm.latest,
        "scheme": hm.scheme,
    }


def test_the_oracle_is_the_seed_client(oracle: dict[str, dict[str, Any]]) -> None:
    # The client's own quirk (the trailing slash kept as an empty segment), which no port would invent.
    assert oracle[f"unpack:{QUIRK}"]["result"]["path"] == ["a", "b", ""]


@pytest.mark.parametrize("text", CORPUS)
def test_parse_agrees_with_unpack_hm_id(oracle: dict[str, dict[str, Any]], text: str) -> None:
    expected = oracle[f"unpack:{text}"]["result"]
    assert expected is not None, f"the client refuses {text!r}"
    expected["path"] = [segment for segment in expected["path"] if segment]
    assert _as_js(parse_hm_id(text)) == expected


@pytest.mark.parametrize("text", CORPUS)
def test_pack_of_parse_agrees_with_the_client(oracle: dict[str, dict[str, Any]], text: str) -> None:
    assert pack_hm_id(parse_hm_id(text)) == oracle[f"repack:{text}"]["result"]


@pytest.mark.parametrize("index", range(len(PACK_CASES)))
def test_pack_agrees_with_pack_hm_id(oracle: dict[str, dict[str, Any]], index: int) -> None:
    assert pack_hm_id(PACK_CASES[index]) == oracle[f"pack:{index}"]["result"]


@pytest.mark.parametrize("text", REFUSED_BY_BOTH)
def test_ids_the_client_refuses_are_refused(oracle: dict[str, dict[str, Any]], text: str) -> None:
    assert oracle[f"unpack:{text}"]["result"] is None
    with pytest.raises(BadRequest) as raised:
        parse_hm_id(text)
    assert ACCEPTED_FORM in raised.value.message


@pytest.mark.parametrize("text", REFUSED_HERE_ONLY)
def test_ids_that_cannot_name_a_resource_are_refused_with_the_accepted_form(
    oracle: dict[str, dict[str, Any]], text: str
) -> None:
    assert oracle[f"unpack:{text}"]["result"] is not None  # the client would have guessed
    with pytest.raises(BadRequest) as raised:
        parse_hm_id(text)
    assert ACCEPTED_FORM in raised.value.message
    assert repr(text) in raised.value.message


def test_parse_keeps_view_terms_as_path_segments() -> None:
    hm = parse_hm_id(f"hm://{ACCOUNT}/notes/:comments/{OTHER}/{TSID}")
    assert hm.path == ("notes", ":comments", OTHER, TSID)
    assert hm.path_string == f"/notes/:comments/{OTHER}/{TSID}"


def test_id_and_path_string_drop_version_fragment_and_empty_segments() -> None:
    hm = parse_hm_id(f"https://{GATEWAY}/hm/{ACCOUNT}/a//b/?v={V1}#blk+")
    assert hm.id == f"hm://{ACCOUNT}/a/b"
    assert hm.path_string == "/a/b"
    assert (hm.hostname, hm.scheme, hm.version, hm.latest, hm.block_ref, hm.expanded) == (
        GATEWAY,
        "https",
        V1,
        False,
        "blk",
        True,
    )
    home = parse_hm_id(f"hm://{ACCOUNT}/")
    assert (home.id, home.path, home.path_string) == (f"hm://{ACCOUNT}", (), "")


def test_pack_refuses_an_id_without_an_account() -> None:
    with pytest.raises(BadRequest):
        pack_hm_id(HmId(uid="", path=("x",)))


@pytest.mark.parametrize("value", [None, "", 42])
def test_parse_refuses_non_strings_and_empty_text(value: Any) -> None:
    with pytest.raises(BadRequest) as raised:
        parse_hm_id(value)
    assert ACCEPTED_FORM in raised.value.message


def test_version_string_sorts_deduplicates_and_joins_with_dots() -> None:
    one, two = cid_of(b"one"), cid_of(b"two")
    expected = f"{V1}.{V2}"
    assert version_string([two, one, two]) == expected
    assert version_string([str(one), two]) == expected
    assert version_string([one]) == str(one)
    assert [str(c) for c in parse_version(expected)] == [V1, V2]


def test_parse_version_keeps_the_written_order() -> None:
    assert [str(c) for c in parse_version(f"{V2}.{V1}")] == [V2, V1]


@pytest.mark.parametrize("text", ["", ".", f"{V1}.", f".{V1}", f"{V1}..{V2}", "notacid", f"{V1}.Qm"])
def test_parse_version_refuses_anything_but_dot_joined_cids(text: str) -> None:
    with pytest.raises(BadRequest) as raised:
        parse_version(text)
    assert "CID" in raised.value.message
