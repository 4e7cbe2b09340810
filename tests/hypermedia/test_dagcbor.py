"""DAG-CBOR and CIDs, checked byte for byte against the JS reference (`@ipld/dag-cbor`, tests/js/oracle.mjs).

The oracle runs once per module with every case in one batch. It needs Node.js and `tests/js/node_modules`, which
`make test` installs; without them these tests fail rather than skip, because passing without the reference would
prove nothing about compatibility.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from mcp_harness.hypermedia import (
    CID,
    DAG_CBOR,
    DAG_PB,
    MAX_SAFE_INTEGER,
    RAW,
    SHA2_256,
    cid_of,
    decode,
    encode,
    from_json,
)
from tests.js_oracle import run_js

HELLO = cid_of(b"hello")
EMPTY_RAW = cid_of(b"", RAW)
CIDV0 = CID.parse("QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n")
DAG_PB_V1 = cid_of(b"\x0a\x02\x08\x01", DAG_PB)

# Python values: the oracle gets them as tagged JSON (see _oracle_json), Python encodes them directly.
NATIVE_CASES: dict[str, object] = {
    **{f"int {n}": n for n in (0, 1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**53 - 1, 2**53)},
    **{f"int {n}": n for n in (2**63, 2**64 - 1)},
    **{f"int {n}": n for n in (-1, -24, -25, -256, -257, -65536, -65537, -(2**32), -(2**32) - 1, -(2**53) + 1)},
    **{f"int {n}": n for n in (-(2**53), -(2**63), -(2**64))},
    **{
        f"float {x!r}": x
        for x in (0.5, -2.5, 1e300, -1e-300, 0.1, 5e-324, 1.7976931348623157e308, 1.0, -0.0, 2.0, -7.0, 1e16)
    },
    "float 2**53 - 1 (an integer in JS)": float(2**53 - 1),
    "float 2**53 (not a safe integer, so a double)": float(2**53),
    "float -(2**53)": -float(2**53),
    "true": True,
    "false": False,
    "null": None,
    "empty string": "",
    "string of 23": "x" * 23,
    "string of 24": "x" * 24,
    "string of 255": "x" * 255,
    "string of 256": "x" * 256,
    "string of 65536": "y" * 65536,
    "unicode string": "héllo wörld — 日本語 🎉",
    "NUL in a string": "a\0b",
    "empty bytes": b"",
    "bytes": b"\x00\xff\x10",
    "bytes of 24": b"z" * 24,
    "all byte values": bytes(range(256)),
    "empty list": [],
    "empty map": {},
    "nested empties": [[], {}, [[]], {"a": {}}],
    "list of 24": list(range(24)),
    "map of 24": {f"k{i}": i for i in range(24)},
    "keys of many lengths": {"b": 1, "a": 2, "aa": 3, "z": 4, "zz": 5, "ab": 6, "abc": 7, "": 8, "B": 9},
    "non-ascii keys": {"é": 1, "z": 2, "aa": 3, "日": 4, "日本": 5, "😀": 6, "ß": 7, "zzz": 8, "zzzz": 9},
    "deep nesting": {"a": {"bb": {"ccc": [1, [2, [3, {"d": [None, True, -1.5]}]]]}}},
    "cid v1 dag-cbor": HELLO,
    "cid v1 raw": EMPTY_RAW,
    "cid v1 dag-pb": DAG_PB_V1,
    "cid v0": CIDV0,
    "change-shaped blob": {
        "type": "Change",
        "signer": b"\xed\x01" + bytes(range(32)),
        "sig": bytes(64),
        "ts": 1_764_500_000_123,
        "genesis": HELLO,
        "deps": [HELLO, EMPTY_RAW],
        "depth": 3,
        "body": {
            "opCount": 2,
            "ops": [
                {"type": "ReplaceBlock", "block": {"id": "b1", "type": "Paragraph", "text": "hi", "width": 0.75}},
                {"type": "MoveBlocks", "parent": "", "blocks": ["b1"]},
            ],
        },
    },
    "tuple (an array)": (1, "two", (3.5,)),
}

# JSON texts: the oracle parses them with JSON.parse, Python with json.loads and then from_json.
JSON_CASES: dict[str, str] = {
    "tool schema": '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1.0, "maximum": 1e3}},'
    ' "required": ["n"], "additionalProperties": false}',
    "addendum example": '{"a": 1.0}',
    "1.0": "1.0",
    "1.5": "1.5",
    "-0": "-0",
    "-0.0": "-0.0",
    "1e2": "1e2",
    "1E-2": "1E-2",
    "0.1": "0.1",
    "1.5e-7": "1.5e-7",
    "2**53 - 1": "9007199254740991",
    "2**53": "9007199254740992",
    "2**53 + 1 (rounds to a double in JS)": "9007199254740993",
    "-(2**53) - 1": "-9007199254740993",
    "2**64 - 1": "18446744073709551615",
    "30 digits": "123456789012345678901234567890",
    "9007199254740993.0": "9007199254740993.0",
    "1e300": "1e300",
    "smallest subnormal": "5e-324",
    "largest double": "1.7976931348623157e308",
    "lone high surrogate": '"\\ud800"',
    "lone surrogates in a key and a value": '{"\\udc00x": "a\\ud83d"}',
    "surrogate pair": '"\\ud83d\\ude00"',
    "long string with a lone surrogate": '"' + "a" * 300 + '\\udfff"',
    "escaped NUL": '"\\u0000"',
    "empty key": '{"": null}',
    "unicode keys": '{"é": 1, "z": 2, "aa": 3, "日本": 4, "ß": 5}',
    "empty containers": '[[], {}, ""]',
    "mixed list": '[true, false, null, -1, 1.25, "s", {"k": [0]}]',
}


def _oracle_json(value: object) -> object:
    """A Python value in the JSON form oracle.mjs revives: dag-json links and bytes, plus exact big integers."""
    if isinstance(value, bool) or value is None or isinstance(value, float | str):
        return value
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INTEGER else {"/": {"bigint": str(value)}}
    if isinstance(value, bytes):
        return {"/": {"bytes": base64.b64encode(value).decode("ascii")}}
    if isinstance(value, CID):
        return {"/": str(value)}
    if isinstance(value, list | tuple):
        return [_oracle_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _oracle_json(item) for key, item in value.items()}
    raise AssertionError(f"no oracle form for {value!r}")


def _as_decoded(value: object) -> object:
    """What `decode(encode(value))` should give: arrays come back as lists."""
    if isinstance(value, list | tuple):
        return [_as_decoded(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_decoded(item) for key, item in value.items()}
    return value


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict[str, str]]:
    """The reference's answer for every case, keyed by case id (`native:<id>` / `json:<id>`)."""
    ids = [f"native:{key}" for key in NATIVE_CASES] + [f"json:{key}" for key in JSON_CASES]
    documents = [json.dumps(_oracle_json(value)) for value in NATIVE_CASES.values()] + list(JSON_CASES.values())
    results = run_js("oracle.mjs", documents, package="@ipld/dag-cbor")
    assert len(results) == len(ids)
    return dict(zip(ids, results, strict=True))


def _reference(oracle: dict[str, dict[str, str]], case_id: str) -> tuple[bytes, str]:
    answer = oracle[case_id]
    assert "error" not in answer, f"the reference refused {case_id}: {answer['error']}"
    return bytes.fromhex(answer["hex"]), answer["cid"]


def test_the_oracle_is_the_real_reference_encoder(oracle: dict[str, dict[str, str]]) -> None:
    # The bytes HYPERMEDIA.md's addendum quotes from @ipld/dag-cbor, fixed here rather than computed by our encoder.
    assert _reference(oracle, "json:addendum example")[0] == bytes.fromhex("a1616101")
    assert _reference(oracle, "json:1.5")[0] == bytes.fromhex("fb3ff8000000000000")
    assert len(oracle) == len(NATIVE_CASES) + len(JSON_CASES)
    assert all("error" not in answer for answer in oracle.values())


@pytest.mark.parametrize("case", list(NATIVE_CASES))
def test_encoding_matches_the_js_reference(oracle: dict[str, dict[str, str]], case: str) -> None:
    expected_bytes, expected_cid = _reference(oracle, f"native:{case}")
    encoded = encode(NATIVE_CASES[case])
    assert encoded.hex() == expected_bytes.hex()
    assert str(cid_of(encoded)) == expected_cid


@pytest.mark.parametrize("case", list(JSON_CASES))
def test_json_documents_encode_as_the_js_reference_encodes_json_parse(
    oracle: dict[str, dict[str, str]], case: str
) -> None:
    expected_bytes, expected_cid = _reference(oracle, f"json:{case}")
    encoded = encode(from_json(json.loads(JSON_CASES[case])))
    assert encoded.hex() == expected_bytes.hex()
    assert str(cid_of(encoded)) == expected_cid


@pytest.mark.parametrize("case", list(NATIVE_CASES))
def test_decode_reads_the_reference_bytes_and_reencodes_them_unchanged(
    oracle: dict[str, dict[str, str]], case: str
) -> None:
    reference_bytes, _ = _reference(oracle, f"native:{case}")
    decoded = decode(reference_bytes)
    assert decoded == _as_decoded(NATIVE_CASES[case])
    assert encode(decoded) == reference_bytes


@pytest.mark.parametrize("case", list(NATIVE_CASES))
def test_decode_inverts_encode(case: str) -> None:
    assert decode(encode(NATIVE_CASES[case])) == _as_decoded(NATIVE_CASES[case])


def test_map_keys_sort_by_length_then_bytes() -> None:
    encoded = encode({"type": "x", "ts": 1, "body": 2, "a": 3})
    assert encoded == bytes.fromhex("a4") + b"".join(
        bytes([0x60 + len(key)]) + key.encode() + value
        for key, value in [("a", b"\x03"), ("ts", b"\x01"), ("body", b"\x02"), ("type", b"\x61x")]
    )


def test_a_cid_is_tag_42_around_a_zero_prefixed_binary_cid() -> None:
    binary = HELLO.to_bytes()
    assert encode(HELLO) == bytes([0xD8, 42, 0x58, len(binary) + 1, 0]) + binary


def test_integral_floats_are_integers_and_others_are_64_bit() -> None:
    assert encode(1.0) == encode(1) == b"\x01"
    assert encode(-0.0) == b"\x00"
    assert encode(1.5) == bytes.fromhex("fb3ff8000000000000")
    assert encode(float(2**53)) == bytes.fromhex("fb4340000000000000")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, [1, math.nan], {"a": math.inf}])
def test_encode_refuses_nan_and_infinity(value: object) -> None:
    with pytest.raises(ValueError):
        encode(value)


@pytest.mark.parametrize("key", [1, b"k", None, (1,), 1.5, True])
def test_encode_refuses_map_keys_that_are_not_strings(key: object) -> None:
    with pytest.raises(TypeError) as raised:
        encode({key: 1})
    assert type(key).__qualname__ in str(raised.value)


@pytest.mark.parametrize(
    "value",
    [{1, 2}, frozenset(), object(), Decimal("1.5"), datetime(2026, 1, 1, tzinfo=UTC), 1j, [{"a": {1}}], range(3)],
)
def test_encode_refuses_unsupported_types_by_name(value: object) -> None:
    with pytest.raises(TypeError) as raised:
        encode(value)
    innermost = value[0]["a"] if isinstance(value, list) else value
    assert type(innermost).__qualname__ in str(raised.value)


@pytest.mark.parametrize("value", [2**64, -(2**64) - 1, 10**30])
def test_encode_refuses_integers_beyond_64_bits(value: int) -> None:
    with pytest.raises(ValueError):
        encode(value)


def test_encode_refuses_a_value_that_contains_itself() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError):
        encode(loop)


def test_from_json_refuses_integers_beyond_a_double() -> None:
    with pytest.raises(ValueError):
        from_json(json.loads("1" + "0" * 400))


def test_from_json_leaves_safe_values_alone() -> None:
    document = {"a": [1, 2.5, "s", None, True], "b": {"c": -(2**53) + 1}}
    assert from_json(document) == document


@pytest.mark.parametrize(
    "hex_bytes",
    [
        "9f01ff",  # indefinite-length array
        "7f6161ff",  # indefinite-length text
        "bf616101ff",  # indefinite-length map
        "c100",  # tag 1 (epoch time)
        "d82a4100",  # tag 42 around bytes without a CID
        "d82a420155",  # tag 42 without the 0x00 prefix
        "d82a6100",  # tag 42 around text
        "1805",  # 5 in a two-byte form
        "190005",  # 5 in a three-byte form
        "3800",  # -1 in a two-byte form
        "5800",  # empty bytes with a one-byte length
        "f93c00",  # half float
        "fa3fc00000",  # single float
        "fb7ff8000000000000",  # NaN
        "fb7ff0000000000000",  # Infinity
        "f7",  # undefined
        "f0",  # simple value 16
        "a10101",  # integer key
        "a2616101616102",  # duplicate key
        "0101",  # trailing bytes
        "6261",  # truncated text
        "62c328",  # invalid UTF-8
        "9b00000000ffffffff",  # array claiming more items than bytes
        "1c",  # reserved additional information
        "",  # nothing
    ],
)
def test_decode_refuses_what_dag_cbor_forbids(hex_bytes: str) -> None:
    with pytest.raises(ValueError):
        decode(bytes.fromhex(hex_bytes))


def test_decode_refuses_hostile_nesting() -> None:
    with pytest.raises(ValueError):
        decode(b"\x81" * 10_000 + b"\x00")


def test_cidv1_strings_round_trip(oracle: dict[str, dict[str, str]]) -> None:
    for answer in oracle.values():
        text = answer["cid"]
        cid = CID.parse(text)
        assert (cid.version, cid.codec, cid.hash_code, len(cid.digest)) == (1, DAG_CBOR, SHA2_256, 32)
        assert str(cid) == text
        assert CID.from_bytes(cid.to_bytes()) == cid


def test_cid_of_builds_sha256_cidv1() -> None:
    assert str(EMPTY_RAW) == "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
    assert HELLO.digest == hashlib.sha256(b"hello").digest()
    assert HELLO.to_bytes()[:4] == bytes([0x01, DAG_CBOR, SHA2_256, 32])
    assert str(HELLO).startswith("bafyrei")


def test_cidv0_parses_to_the_sha256_multihash_and_prints_back() -> None:
    text = "QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n"
    cid = CID.parse(text)
    assert (cid.version, cid.codec, cid.hash_code) == (0, DAG_PB, SHA2_256)
    assert cid.digest == hashlib.sha256(b"").digest()
    assert cid.to_bytes() == bytes([0x12, 0x20]) + hashlib.sha256(b"").digest()
    assert str(cid) == text
    assert CID.from_bytes(cid.to_bytes()) == cid
    assert repr(cid) == f"CID({text!r})"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "b",
        "Bafyreihltcnuuyqp2jm24aqydpnlj7b6w3ogwrplomrjtg5rifv44mmjey",  # upper-case multibase prefix
        "zb2rhe5P4gXftAwvA4eXQ5HJwsER2owDyS9sKaQRRVQPn93bA",  # base58btc CIDv1: not a form we accept
        "bafyreihltcnuuyqp2jm24aqydpnlj7b6w3ogwrplomrjtg5rifv44mmje",  # truncated
        "bafyreihltcnuuyqp2jm24aqydpnlj7b6w3ogwrplomrjtg5rifv44mmjez",  # non-canonical last character
        "bafyreihltcnuuyqp2jm24aqydpnlj7b6w3ogwrplomrjtg5rifv44mmje!",  # not base32
        "QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1",  # CIDv0 one character short
        "QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR10",  # '0' is not base58
        "ciqa",  # an unknown multibase prefix
    ],
)
def test_cid_parse_refuses_other_strings(text: str) -> None:
    with pytest.raises(ValueError):
        CID.parse(text)


def test_a_cidv0_multihash_in_base32_is_refused() -> None:
    base32_of_v0 = "b" + base64.b32encode(CIDV0.to_bytes()).decode().lower().rstrip("=")
    with pytest.raises(ValueError):
        CID.parse(base32_of_v0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: CID.from_bytes(HELLO.to_bytes() + b"\x00"),  # digest longer than declared
        lambda: CID.from_bytes(HELLO.to_bytes()[:-1]),  # digest shorter than declared
        lambda: CID.from_bytes(b"\x81\x00" + HELLO.to_bytes()[1:]),  # non-minimal version varint
        lambda: CID.from_bytes(b"\x02" + HELLO.to_bytes()[1:]),  # CIDv2
        lambda: CID.from_bytes(b""),
        lambda: CID(0, DAG_CBOR, CIDV0.multihash),  # CIDv0 is dag-pb only
        lambda: CID(0, DAG_PB, HELLO.multihash[:-1] + b"\x00\x00"),  # bad digest length
        lambda: CID(2, DAG_CBOR, HELLO.multihash),
    ],
)
def test_malformed_binary_cids_are_refused(make: Callable[[], CID]) -> None:
    with pytest.raises(ValueError):
        make()
