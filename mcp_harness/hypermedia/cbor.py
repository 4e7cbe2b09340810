"""Canonical DAG-CBOR: the byte form that tool documents and signed hypermedia blobs are content-addressed in.

The rules are those of the hypermedia spec (HYPERMEDIA.md, §1.1 and its addendum), and the output is checked byte
for byte against `@ipld/dag-cbor` (what the Seed JS client signs with) in tests/hypermedia/test_dagcbor.py:

- map keys are strings, sorted by UTF-8 length first and then bytewise;
- integers and lengths use their shortest form; integers must fit CBOR's 64-bit range;
- floats are always 64-bit, and NaN and ±Infinity are refused (the IPLD data model has no place for them);
- a CID is tag 42 around a byte string of `0x00` followed by the binary CID;
- nothing else: no other tags, no indefinite lengths, no `undefined`.

**Numbers follow JavaScript.** JavaScript has one number type, so `@ipld/dag-cbor` writes any number with an
integral value within ±(2**53 - 1) as a CBOR integer: `1.0` and `1` give the same bytes, and so do `-0.0` and
`0`. `encode` does the same for Python floats, so a Python value and the JS value it mirrors share a CID. Integral
floats from 2**53 up stay 64-bit floats there as here, and Python ints are always written as integers (Go's int64
fields need that). What differs for JSON input is handled by `from_json`: see there.

The encoder is written out here rather than built on cbor2: cbor2's canonical mode shrinks floats to 16 or 32
bits (which DAG-CBOR forbids) and its default mode does not sort keys, the integral-float rule has no hook, and its
decoder accepts indefinite lengths and every tag. Overriding all of that leaves little of cbor2, and its 6.x encoder
is a compiled type; a hundred lines of plain Python are easier to check against the spec.
"""

from __future__ import annotations

import math
import struct

from mcp_harness.hypermedia.cid import CID

MAX_SAFE_INTEGER = 2**53 - 1
"""JavaScript's `Number.MAX_SAFE_INTEGER`: beyond it a JS number is not an exact integer, so it is a float."""

_CID_TAG = 42
_MAX_DEPTH = 256  # deep enough for any document we build; stops hostile input from exhausting the stack
_FLOAT64 = struct.Struct(">d")
CONTAINER_COST = 8
"""What a map or array costs of a decode budget (a scalar costs 1)."""
_BUDGET_FLOOR = 4096

_MAJOR_UNSIGNED = 0
_MAJOR_NEGATIVE = 1
_MAJOR_BYTES = 2
_MAJOR_TEXT = 3
_MAJOR_ARRAY = 4
_MAJOR_MAP = 5
_MAJOR_TAG = 6
_MAJOR_SIMPLE = 7

_FALSE = b"\xf4"
_TRUE = b"\xf5"
_NULL = b"\xf6"
_FLOAT64_HEAD = 0xFB


def encode(value: object) -> bytes:
    """Encode a value as canonical DAG-CBOR.

    Accepted: `dict` with `str` keys, `list` and `tuple` (both become arrays), `str`, `bytes`/`bytearray`,
    `int`, `float`, `bool`, `None` and `CID`.

    Raises:
        TypeError: a value (or a map key) is of a type DAG-CBOR has no form for.
        ValueError: a float is NaN or infinite, an int is beyond CBOR's 64-bit range, or a string holds lone
            surrogates.
    """
    out = bytearray()
    _encode_into(out, value, 0)
    return bytes(out)


def budget_for(size: int) -> int:
    """The allocation budget (`decode`'s `budget`) for `size` bytes from elsewhere: twice the bytes, at least
    `_BUDGET_FLOOR`. Real blobs spend well under one unit per byte (keys and text take several bytes each); a
    body of nothing but empty maps or arrays, which costs ~70 bytes of Python per byte of CBOR, runs out."""
    return max(_BUDGET_FLOOR, 2 * size)


def decode(data: bytes, *, budget: int | None = None) -> object:
    """Decode one DAG-CBOR value that spans all of `data`.

    `budget` bounds what decoding may allocate, for bytes from elsewhere: each scalar costs 1 and each map or array
    `CONTAINER_COST` (an empty Python dict or list is far bigger than the one byte that makes it); past the budget
    decoding stops with a ValueError. None (the default, for our own bytes) is unbounded.

    Tag 42 becomes a `CID`, maps become `dict`, arrays `list`, byte strings `bytes`. It is as strict as
    `@ipld/dag-cbor`'s decoder, so whatever decodes here also decodes there: integers and lengths must be minimal,
    map keys strings and unique, floats 64-bit and finite; other tags, indefinite lengths and `undefined` are
    refused. Key order is not checked (nor is it there); re-encoding yields the canonical order.

    Raises:
        ValueError: the bytes are not valid DAG-CBOR, with the offset of the first problem.
    """
    reader = _Reader(bytes(data), budget)
    value = reader.value(0)
    if reader.position != len(reader.data):
        raise ValueError(f"DAG-CBOR: {len(reader.data) - reader.position} trailing bytes after the value")
    return value


def from_json(value: object) -> object:
    """Turn a `json.loads` result into the value JavaScript's `JSON.parse` gives for the same text.

    Tool documents arrive as JSON, and the JS reference encodes `JSON.parse(text)`. Two readings differ, and this
    brings Python's into line so that `encode(from_json(json.loads(text)))` equals the reference bytes:

    - an integer beyond ±(2**53 - 1) is an exact `int` in Python but the nearest double in JavaScript, so it
      becomes that `float` (and is then written as a 64-bit float, as the reference writes it);
    - a lone surrogate (`"\\ud800"`) survives in a Python `str` but is written by the reference as U+FFFD, so it
      is replaced by U+FFFD.

    Integral floats such as `1.0` need nothing here: `encode` already writes them as integers.

    Raises:
        ValueError: an integer is too large even for a double (JavaScript reads Infinity, which DAG-CBOR refuses),
            or two keys of one object become equal once their lone surrogates are replaced.
    """
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        try:
            return float(value)
        except OverflowError:
            raise ValueError(
                f"JSON number {value} is beyond the range of a double; JavaScript reads it as Infinity, "
                "which DAG-CBOR cannot encode"
            ) from None
    if isinstance(value, str):
        return _replace_lone_surrogates(value)
    if isinstance(value, list):
        return [from_json(item) for item in value]
    if isinstance(value, dict):
        result: dict[object, object] = {}
        for key, item in value.items():
            fixed_key = _replace_lone_surrogates(key) if isinstance(key, str) else key
            if fixed_key in result:
                raise ValueError(f"JSON object keys collide once lone surrogates are replaced: {fixed_key!r}")
            result[fixed_key] = from_json(item)
        return result
    return value


def _replace_lone_surrogates(text: str) -> str:
    # json.loads already joins valid surrogate pairs into one code point, so any surrogate left is a lone one.
    if text.isascii():
        return text
    return "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in text)


def _head(out: bytearray, major: int, argument: int) -> None:
    """Write a major type with its argument in the shortest form CBOR allows."""
    major <<= 5
    if argument < 24:
        out.append(major | argument)
    elif argument < 0x100:
        out.append(major | 24)
        out.append(argument)
    elif argument < 0x10000:
        out.append(major | 25)
        out += argument.to_bytes(2, "big")
    elif argument < 0x100000000:
        out.append(major | 26)
        out += argument.to_bytes(4, "big")
    else:
        out.append(major | 27)
        out += argument.to_bytes(8, "big")


def _encode_into(out: bytearray, value: object, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise ValueError(f"DAG-CBOR: value nested deeper than {_MAX_DEPTH} levels (or it contains itself)")
    # bool before int: bool is a subclass of int.
    if value is None:
        out += _NULL
    elif value is True:
        out += _TRUE
    elif value is False:
        out += _FALSE
    elif isinstance(value, int):
        _encode_int(out, value)
    elif isinstance(value, float):
        _encode_float(out, value)
    elif isinstance(value, str):
        encoded = value.encode("utf-8")
        _head(out, _MAJOR_TEXT, len(encoded))
        out += encoded
    elif isinstance(value, bytes | bytearray):
        _head(out, _MAJOR_BYTES, len(value))
        out += value
    elif isinstance(value, list | tuple):
        _head(out, _MAJOR_ARRAY, len(value))
        for item in value:
            _encode_into(out, item, depth + 1)
    elif isinstance(value, dict):
        _encode_map(out, value, depth)
    elif isinstance(value, CID):
        binary = b"\0" + value.to_bytes()  # the 0x00 is the multibase "identity" prefix DAG-CBOR requires
        _head(out, _MAJOR_TAG, _CID_TAG)
        _head(out, _MAJOR_BYTES, len(binary))
        out += binary
    else:
        raise TypeError(f"cannot encode a {type(value).__qualname__!r} as DAG-CBOR")


def _encode_int(out: bytearray, value: int) -> None:
    if 0 <= value < 2**64:
        _head(out, _MAJOR_UNSIGNED, value)
    elif -(2**64) <= value < 0:
        _head(out, _MAJOR_NEGATIVE, -1 - value)
    else:
        raise ValueError(f"DAG-CBOR integers must lie in [-2**64, 2**64 - 1]; {value} does not")


def _encode_float(out: bytearray, value: float) -> None:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"DAG-CBOR cannot encode {value!r}: the IPLD data model has no NaN or Infinity")
    # What @ipld/dag-cbor does with a JS number: a safe integer is an integer (so -0.0 is 0), anything else a double.
    if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        _encode_int(out, int(value))
    else:
        out.append(_FLOAT64_HEAD)
        out += _FLOAT64.pack(value)


def _encode_map(out: bytearray, value: dict[object, object], depth: int) -> None:
    entries: list[tuple[bytes, object]] = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"DAG-CBOR map keys must be str, not {type(key).__qualname__!r} (key {key!r})")
        entries.append((key.encode("utf-8"), item))
    entries.sort(key=lambda entry: (len(entry[0]), entry[0]))
    _head(out, _MAJOR_MAP, len(entries))
    for key_bytes, item in entries:
        _head(out, _MAJOR_TEXT, len(key_bytes))
        out += key_bytes
        _encode_into(out, item, depth + 1)


class _Reader:
    """A cursor over the bytes being decoded."""

    __slots__ = ("budget", "data", "limit", "position")

    def __init__(self, data: bytes, budget: int | None = None) -> None:
        self.data = data
        self.position = 0
        self.limit = budget
        self.budget = budget if budget is not None else -1

    def spend(self, cost: int, start: int) -> None:
        if self.limit is None:
            return
        self.budget -= cost
        if self.budget < 0:
            raise self.fail(
                f"holds more maps, arrays and values than {len(self.data)} bytes may (a decode budget of "
                f"{self.limit}, a container costing {CONTAINER_COST})",
                start,
            )

    def fail(self, reason: str, at: int | None = None) -> ValueError:
        return ValueError(f"invalid DAG-CBOR at byte {self.position if at is None else at}: {reason}")

    def take(self, count: int) -> bytes:
        end = self.position + count
        if end > len(self.data):
            raise self.fail(f"needs {count} more bytes, only {len(self.data) - self.position} left")
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def head(self) -> tuple[int, int, int]:
        """Read an initial byte and its argument: (major type, minor, argument), refusing non-minimal forms."""
        start = self.position
        initial = self.take(1)[0]
        major, minor = initial >> 5, initial & 0x1F
        if major == _MAJOR_SIMPLE:
            return major, minor, 0  # floats and simple values read their own payload
        if minor < 24:
            return major, minor, minor
        if minor == 31:
            raise self.fail("indefinite-length items are not allowed", start)
        if minor > 27:
            raise self.fail(f"reserved additional information {minor}", start)
        size = 1 << (minor - 24)
        argument = int.from_bytes(self.take(size), "big")
        # Each width must be needed: the value must not fit the next smaller form.
        smallest = 24 if size == 1 else 1 << (4 * size)
        if argument < smallest:
            raise self.fail("integer or length not in its shortest form", start)
        return major, minor, argument

    def value(self, depth: int) -> object:
        if depth > _MAX_DEPTH:
            raise self.fail(f"nested deeper than {_MAX_DEPTH} levels")
        start = self.position
        major, minor, argument = self.head()
        self.spend(CONTAINER_COST if major in (_MAJOR_ARRAY, _MAJOR_MAP) else 1, start)
        if major == _MAJOR_UNSIGNED:
            return argument
        if major == _MAJOR_NEGATIVE:
            return -1 - argument
        if major == _MAJOR_BYTES:
            return self.take(argument)
        if major == _MAJOR_TEXT:
            try:
                return self.take(argument).decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail("text string is not valid UTF-8", start) from None
        if major == _MAJOR_ARRAY:
            # Every item takes at least a byte, so a count beyond what's left is a lie; don't loop on it.
            if argument > len(self.data) - self.position:
                raise self.fail(f"array claims {argument} items, more than the bytes left", start)
            return [self.value(depth + 1) for _ in range(argument)]
        if major == _MAJOR_MAP:
            return self.map(argument, depth, start)
        if major == _MAJOR_TAG:
            return self.tagged(argument, depth, start)
        return self.simple(minor, start)

    def map(self, count: int, depth: int, start: int) -> dict[str, object]:
        if 2 * count > len(self.data) - self.position:
            raise self.fail(f"map claims {count} entries, more than the bytes left", start)
        result: dict[str, object] = {}
        for _ in range(count):
            key_start = self.position
            key = self.value(depth + 1)
            if not isinstance(key, str):
                raise self.fail(f"map keys must be text strings, found {type(key).__qualname__}", key_start)
            if key in result:
                raise self.fail(f"duplicate map key {key!r}", key_start)
            result[key] = self.value(depth + 1)
        return result

    def tagged(self, tag: int, depth: int, start: int) -> CID:
        if tag != _CID_TAG:
            raise self.fail(f"tag {tag} is not allowed (only tag 42, a CID)", start)
        content = self.value(depth + 1)
        if not isinstance(content, bytes) or not content.startswith(b"\0"):
            raise self.fail("tag 42 must wrap a byte string starting with 0x00", start)
        try:
            return CID.from_bytes(content[1:])
        except ValueError as error:
            raise self.fail(f"tag 42 holds an invalid CID: {error}", start) from None

    def simple(self, minor: int, start: int) -> object:
        if minor == 20:
            return False
        if minor == 21:
            return True
        if minor == 22:
            return None
        if minor == 27:
            value: float = _FLOAT64.unpack(self.take(8))[0]
            if math.isnan(value) or math.isinf(value):
                raise self.fail("NaN and Infinity are not allowed", start)
            return value
        if minor in (25, 26):
            raise self.fail("floats must be 64-bit", start)
        raise self.fail(f"simple value {minor} is not allowed (only false, true, null and 64-bit floats)", start)


__all__ = ["CONTAINER_COST", "MAX_SAFE_INTEGER", "budget_for", "decode", "encode", "from_json"]
