"""The Seed web API wire format (`hypermedia/web_api.py`), checked against the official client's own encoder and
superjson (tests/js/web_oracle.mjs): one oracle batch per module."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import cbor
from mcp_harness.hypermedia.web_api import (
    decode_query,
    encode_query,
    parse_publish_blobs,
    publish_blobs_body,
    superjson_body,
    superjson_value,
)
from tests.js_oracle import run_js

ACCOUNT = "z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"


def _hm(path: list[str] | None, version: str | None = None) -> dict[str, Any]:
    """A full UnpackedHypermediaId, as the client's schemas require (every key present, null or not)."""
    text = f"hm://{ACCOUNT}" + ("/" + "/".join(path) if path else "")
    return {
        "id": text,
        "uid": ACCOUNT,
        "path": path,
        "version": version,
        "blockRef": None,
        "blockRange": None,
        "hostname": None,
        "scheme": "hm",
        "latest": version is None,
    }


# (key, the client's input, our params for encode_query). The client's zod schema puts fields in the schema's order
# before it encodes them, so the inputs here are written in that order.
QUERIES: list[tuple[str, Any, dict[str, Any]]] = [
    (
        "ListEvents",
        {"pageSize": 20, "filterAuthors": [ACCOUNT, "x y~é*"], "filterEventType": [], "currentAccount": ACCOUNT},
        {"pageSize": 20, "filterAuthors": [ACCOUNT, "x y~é*"], "filterEventType": [], "currentAccount": ACCOUNT},
    ),
    (
        "Query",
        {"includes": [{"space": ACCOUNT, "path": "/a b", "mode": "Children"}], "limit": 50},
        {"includes": [{"space": ACCOUNT, "path": "/a b", "mode": "Children"}], "limit": 50},
    ),
    ("ListComments", {"targetId": _hm(["notes", "one"])}, {"targetId": _hm(["notes", "one"])}),
    ("Comment", f"{ACCOUNT}/z1234", {"__value": f"{ACCOUNT}/z1234"}),
    ("Account", ACCOUNT, {"id": ACCOUNT}),
    ("Resource", _hm(["d"], "bafyA.bafyB"), {"id": f"hm://{ACCOUNT}/d?v=bafyA.bafyB"}),
    ("ResourceMetadata", _hm(None), {"id": f"hm://{ACCOUNT}"}),
    ("ListChanges", {"targetId": _hm(["a", "b"])}, {"targetId": f"hm://{ACCOUNT}/a/b"}),
    ("GetCID", {"cid": "bafyreiabc"}, {"cid": "bafyreiabc"}),
]
SUPERJSON: list[Any] = [
    {"a": 1, "b": [True, None, "x"], "c": {"d": 1.5}},
    {"big": 2**60, "when": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC), "list": [{"n": -(2**55)}]},
    datetime(2020, 1, 1, tzinfo=UTC),
    [],
]


def _tagged(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$date": value.isoformat().replace("+00:00", "Z")}
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53 - 1:
        return {"$bigint": str(value)}
    if isinstance(value, dict):
        return {k: _tagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tagged(v) for v in value]
    return value


@pytest.fixture(scope="module")
def oracle() -> dict[str, Any]:
    commands: list[dict[str, Any]] = [{"op": "request", "key": k, "input": i} for k, i, _ in QUERIES]
    commands += [{"op": "serialize", "value": _tagged(v)} for v in SUPERJSON]
    commands.append({"op": "request", "key": "PublishBlobs", "input": {"blobs": BLOBS_INPUT}})
    commands.append({"op": "deserializeQuery", "query": QUERY_TEXT})
    answers = run_js("web_oracle.mjs", commands)
    queries = answers[: len(QUERIES)]
    serialized = answers[len(QUERIES) : len(QUERIES) + len(SUPERJSON)]
    return {"queries": queries, "serialized": serialized, "publish": answers[-2], "decoded": answers[-1]}


BLOBS_INPUT = [{"cid": "bafyreigenesis", "data": {"$bytes": "a16474797065664368616e6765"}}, {"data": {"$bytes": "00"}}]
QUERY_TEXT = "pageSize=5&filterAuthors=%5B%22z6Mk%22%5D&currentAccount=z6Mk+x&flag=true&n=null&raw=%7Bnot"


@pytest.mark.parametrize("index", range(len(QUERIES)), ids=[q[0] for q in QUERIES])
def test_encode_query_matches_the_client(oracle: dict[str, Any], index: int) -> None:
    key, _, params = QUERIES[index]
    sent = oracle["queries"][index]
    assert sent["method"] == "GET"
    assert sent["path"] == f"/api/{key}{encode_query(key, params)}"


def test_decode_query_reads_what_the_client_sent(oracle: dict[str, Any]) -> None:
    from urllib.parse import parse_qsl

    for (key, _, params), sent in zip(QUERIES, oracle["queries"], strict=True):
        query = dict(parse_qsl(sent["path"].partition("?")[2], keep_blank_values=True))
        assert decode_query(key, query) == params, key


def test_decode_query_parses_json_and_keeps_the_rest_as_the_web_app_does(oracle: dict[str, Any]) -> None:
    from urllib.parse import parse_qsl

    ours = decode_query("ListEvents", dict(parse_qsl(QUERY_TEXT, keep_blank_values=True)))
    assert ours == oracle["decoded"]["value"]
    assert ours["raw"] == "{not" and ours["n"] is None and ours["flag"] is True


@pytest.mark.parametrize("index", range(len(SUPERJSON)))
def test_superjson_body_matches_superjson(oracle: dict[str, Any], index: int) -> None:
    assert json.loads(superjson_body(SUPERJSON[index])) == json.loads(oracle["serialized"][index]["text"])


@pytest.mark.parametrize("index", range(len(SUPERJSON)))
def test_superjson_value_revives_bigints_and_dates(oracle: dict[str, Any], index: int) -> None:
    value = superjson_value(oracle["serialized"][index]["text"].encode())
    expected = SUPERJSON[index]
    if isinstance(expected, datetime):
        assert value == "2020-01-01T00:00:00.000Z"
    elif index == 1:
        assert value == {"big": 2**60, "when": "2026-01-02T03:04:05.678Z", "list": [{"n": -(2**55)}]}
    else:
        assert value == expected


def test_superjson_value_takes_a_plain_body_and_refuses_a_bad_path() -> None:
    assert superjson_value(b'{"error": "nope"}') == {"error": "nope"}
    with pytest.raises(BadRequest):
        superjson_value(b'{"json": {"a": 1}, "meta": {"values": {"b.c": ["bigint"]}}}')
    with pytest.raises(BadRequest):
        superjson_value(b"not json")


def test_publish_blobs_body_is_the_clients_bytes(oracle: dict[str, Any]) -> None:
    ours = publish_blobs_body([("bafyreigenesis", bytes.fromhex("a16474797065664368616e6765")), (None, b"\x00")])
    assert oracle["publish"]["method"] == "POST"
    assert ours.hex() == oracle["publish"]["body"]
    assert parse_publish_blobs(ours) == [
        (bytes.fromhex("a16474797065664368616e6765"), "bafyreigenesis"),
        (b"\x00", None),
    ]


@pytest.mark.parametrize(
    "body",
    [
        b"\xff",
        cbor.encode({"blob": []}),
        cbor.encode({"blobs": [{"data": "text"}]}),
        cbor.encode({"blobs": [{"cid": 1, "data": b""}]}),
    ],
    ids=["not-cbor", "no-blobs", "data-not-bytes", "cid-not-string"],
)
def test_parse_publish_blobs_refuses_a_malformed_body(body: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_publish_blobs(body)
