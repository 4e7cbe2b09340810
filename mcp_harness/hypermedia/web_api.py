"""The Seed web API's wire format (HYPERMEDIA §4), as pure functions both sides of it use.

`server/seed_api.py` answers the official client with these, and the push/pull client (`hypermedia/sync/`) asks
another server with them, so one reading of the format serves both. Checked against the client's own encoder
(`@seed-hypermedia/client` 0.0.83, `client.ts`) and `superjson` 2.2.1 in tests/hypermedia/test_web_api.py.

- A query is `GET /api/<Key><query string>`. Five keys map their input to fixed string parameters
  (`CUSTOM_PARAMS`); every other key sends each top-level field as one parameter, a string, number or boolean as
  `String(v)` and anything else as `JSON.stringify(v)`, and the server `JSON.parse`s each value, keeping the raw
  text when it is not JSON. A non-object input travels alone as `__value`. The text is `URLSearchParams`' form
  encoding (space as `+`, only `A-Za-z0-9*-._` left bare), which differs from Python's `quote_plus` on `~`.
- A response is superjson: `{"json": value, "meta"?: {"values": {path: [type]}}}`, where a path is the keys down
  to a value joined by `.`, and a type tells how to revive the JSON there (`bigint` from a string, `Date` from an
  ISO string).
- An action is `POST /api/<Key>` with a DAG-CBOR body; the one both sides need is PublishBlobs,
  `{blobs: [{cid?, data}]}` answered by `{cids: [...]}`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from mcp_harness.errors import BadRequest
from mcp_harness.hypermedia import cbor

PRIMITIVE_KEY = "__value"
"""The parameter a non-object input travels under (`client.ts`' `PRIMITIVE_VALUE_KEY`)."""
CUSTOM_PARAMS: Mapping[str, tuple[str, ...]] = {
    "Account": ("id",),
    "Resource": ("id",),
    "ResourceMetadata": ("id",),
    "ListCitations": ("targetId",),
    "ListChanges": ("targetId",),
    "ListCapabilities": ("targetId",),
    "DiscoveryStatus": ("uid", "path", "v", "l"),
}
"""Keys whose parameters are plain strings, never JSON-parsed (`QUERY_PARAM_SERIALIZERS`): Resource takes
`id=<packed hm:// id>`, Account `id=<account>`, ListChanges `targetId=<packed hm:// id>`."""
MAX_PUBLISH_BLOBS = 10_000
"""Most blobs one PublishBlobs request may carry (as many as one pull fetches)."""
_ENVELOPE_BUDGET = 64 + MAX_PUBLISH_BLOBS * (cbor.CONTAINER_COST + 8)
"""A budget for the envelope: the map, its key and array, and per item a map of a few keys and values."""
_FORM_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789*-._")
_MAX_SAFE_INTEGER = 2**53 - 1
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a Python str holds surrogates only unpaired


def encode_query(key: str, params: Mapping[str, Any]) -> str:
    """The query string the client sends for `key` (with its leading `?`, or `""` when there are no parameters).

    For the `CUSTOM_PARAMS` keys `params` are the wire parameters themselves, already strings (pack an hm:// id
    with `ids.pack_hm_id` first); for every other key they are the request's input object, a `None` field left out
    as the client leaves out `undefined` and `null`. `{PRIMITIVE_KEY: v}` sends a non-object input.
    """
    pairs: list[tuple[str, str]] = []
    for name, value in params.items():
        if value is None:
            continue
        if key in CUSTOM_PARAMS or name == PRIMITIVE_KEY:
            pairs.append((name, value if isinstance(value, str) else _js_string(value)))
        elif isinstance(value, str | bool | int | float):
            pairs.append((name, _js_string(value)))
        else:
            pairs.append((name, js_json(value)))
    text = "&".join(f"{_form_encode(name)}={_form_encode(value)}" for name, value in pairs)
    return f"?{text}" if text else ""


def decode_query(key: str, query: Mapping[str, str]) -> dict[str, Any]:
    """The request input the server reads from a decoded query (`name → value`, as Starlette's `QueryParams`).

    `CUSTOM_PARAMS` keys keep their values as strings; every other key has each value `JSON.parse`d, falling back
    to the raw text, exactly as the web app's `deserializeQueryString`. A lone `__value` is returned as
    `{"__value": raw text}`, unparsed (the server hands it to the schema as it is).
    """
    if key in CUSTOM_PARAMS:
        return dict(query)
    if set(query) == {PRIMITIVE_KEY}:
        return {PRIMITIVE_KEY: query[PRIMITIVE_KEY]}
    return {name: _json_or_text(value) for name, value in query.items()}


def superjson_body(value: Any) -> bytes:
    """`JSON.stringify(superjson.serialize(value))` for a JSON-like Python value: an `int` beyond JavaScript's safe
    range goes out as a `bigint` string and a `datetime` as a `Date` ISO string, each named in `meta.values`."""
    annotations: dict[str, list[str]] = {}
    plain = _plain(value, [], annotations)
    out: dict[str, Any] = {"json": plain}
    if annotations:
        # A value at the root is annotated by a bare type list, not by a path.
        out["meta"] = {"values": annotations[""] if "" in annotations else annotations}
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def superjson_value(body: bytes) -> Any:
    """The value a superjson response body carries, `meta.values` applied: `bigint` → `int`, `Date` → its ISO
    string, `undefined` → `None`, `set` → a list, `map` → a dict. A body without `json` is returned as it is.

    Raises:
        BadRequest: the body is not JSON, or `meta.values` names a path that is not there.
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"The response is not JSON: {exc}.") from None
    if not isinstance(data, dict) or "json" not in data:
        return data
    value: Any = data["json"]
    meta = data.get("meta")
    values = meta.get("values") if isinstance(meta, dict) else None
    if isinstance(values, list):
        return _revive(value, values)
    if isinstance(values, dict):
        for path, kinds in values.items():
            value = _revive_at(value, _parse_path(str(path)), kinds)
    return value


def publish_blobs_body(blobs: Sequence[tuple[str | None, bytes]]) -> bytes:
    """The DAG-CBOR body of `POST /api/PublishBlobs`: `{blobs: [{cid, data}]}`, in the order given (send Changes
    before the Refs that point at them); a `None` or empty CID is left out, as the client leaves it out for Refs."""
    items: list[dict[str, Any]] = []
    for cid, data in blobs:
        item: dict[str, Any] = {"data": bytes(data)}
        if cid:
            item["cid"] = cid
        items.append(item)
    return cbor.encode({"blobs": items})


def parse_publish_blobs(body: bytes) -> list[tuple[bytes, str | None]]:
    """The `(data, cid or None)` pairs of a PublishBlobs body, in order, as `node.ingest` takes them. Other keys
    are ignored (the web app's schema strips them).

    The body is decoded under an allocation budget sized for its shape (at most `MAX_PUBLISH_BLOBS` items of a
    few fields each), so a hostile envelope of millions of empty maps is refused after a few thousand of them
    instead of costing hundreds of megabytes first.

    Raises:
        BadRequest: the body is not DAG-CBOR or not `{blobs: [{cid?: string, data: bytes}]}` (at most
            `MAX_PUBLISH_BLOBS` items), naming the item.
    """
    shape = "{blobs: [{cid?: string, data: bytes}]}"
    if body[:1] and body[0] >> 5 != 5:  # the first byte's major type: a map or nothing
        raise BadRequest(f"The PublishBlobs body must be a DAG-CBOR map {shape}.")
    try:
        value = cbor.decode(body, budget=_ENVELOPE_BUDGET)
    except ValueError as exc:
        raise BadRequest(
            f"The PublishBlobs body is not a DAG-CBOR {shape} of at most {MAX_PUBLISH_BLOBS} blobs: {exc}."
        ) from None
    items = value.get("blobs") if isinstance(value, dict) else None
    if not isinstance(items, list):
        raise BadRequest(f"The PublishBlobs body must be a map {shape}.")
    if len(items) > MAX_PUBLISH_BLOBS:
        raise BadRequest(f"The PublishBlobs body holds {len(items)} blobs; at most {MAX_PUBLISH_BLOBS} per request.")
    out: list[tuple[bytes, str | None]] = []
    for index, item in enumerate(items):
        data = item.get("data") if isinstance(item, dict) else None
        cid = item.get("cid") if isinstance(item, dict) else None
        if not isinstance(data, bytes):
            raise BadRequest(f"blobs[{index}].data must be a byte string (DAG-CBOR bytes) holding the blob.")
        if cid is not None and not isinstance(cid, str):
            raise BadRequest(f"blobs[{index}].cid must be a CID string when present.")
        out.append((data, cid or None))
    return out


def js_json(value: Any) -> str:
    """`JSON.stringify(value)`: compact, non-ASCII as is, integral floats written as integers."""
    return json.dumps(_js_numbers(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _js_numbers(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_SAFE_INTEGER:
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _js_numbers(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return [_js_numbers(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _js_string(value: Any) -> str:
    """`String(value)` for a primitive."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return js_json(value)
    return str(value)


def _form_encode(text: str) -> str:
    """`URLSearchParams`' serializer (application/x-www-form-urlencoded, lone surrogates as U+FFFD)."""
    out: list[str] = []
    for byte in _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8"):
        if byte in _FORM_SAFE:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # JSON.parse refuses NaN and Infinity; Python's json accepts them


def _plain(value: Any, path: list[str], annotations: dict[str, list[str]]) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        if abs(value) <= _MAX_SAFE_INTEGER:
            return value
        annotations[_stringify_path(path)] = ["bigint"]
        return str(value)
    if isinstance(value, datetime):
        annotations[_stringify_path(path)] = ["Date"]
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): _plain(v, [*path, str(k)], annotations) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return [_plain(v, [*path, str(i)], annotations) for i, v in enumerate(value)]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    raise TypeError(f"superjson_body cannot carry a {type(value).__name__}")


def _stringify_path(path: list[str]) -> str:
    return ".".join(part.replace(".", "\\.") for part in path)


def _parse_path(text: str) -> list[str]:
    """superjson's `parsePath`: `.` separates keys, `\\.` is a dot inside one."""
    parts: list[str] = []
    segment: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and text[index + 1 : index + 2] == ".":
            segment.append(".")
            index += 2
            continue
        if char == ".":
            parts.append("".join(segment))
            segment = []
        else:
            segment.append(char)
        index += 1
    parts.append("".join(segment))
    return parts


def _revive_at(value: Any, path: list[str], kinds: Any) -> Any:
    if path == [""] or not path:
        return _revive(value, kinds)
    head, rest = path[0], path[1:]
    if isinstance(value, dict) and head in value:
        value[head] = _revive_at(value[head], rest, kinds)
        return value  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list) and head.isdigit() and int(head) < len(value):
        value[int(head)] = _revive_at(value[int(head)], rest, kinds)
        return value  # pyright: ignore[reportUnknownVariableType]
    raise BadRequest(f"The superjson meta names a value at {head!r} that the response does not have.")


def _revive(value: Any, kinds: Any) -> Any:
    kind = kinds[0] if isinstance(kinds, list) and kinds else kinds
    if kind == "bigint" and isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise BadRequest(f"The superjson bigint {value!r} is not an integer.") from None
    if kind == "undefined":
        return None
    if kind == "map" and isinstance(value, list):
        return {str(k): v for k, v in value}  # pyright: ignore[reportUnknownVariableType]
    return value  # Date stays its ISO string; a set stays a list


__all__ = [
    "CUSTOM_PARAMS",
    "MAX_PUBLISH_BLOBS",
    "PRIMITIVE_KEY",
    "decode_query",
    "encode_query",
    "js_json",
    "parse_publish_blobs",
    "publish_blobs_body",
    "superjson_body",
    "superjson_value",
]
