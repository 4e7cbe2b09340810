"""What arrives on the wire, before the SDK sees it: every line (stdio) or body (HTTP) is a message or an answer.

The SDK's parser refuses some input without a reply a client can match: on stdio nothing is written back and the
client waits forever; over HTTP the error has `id: null` and a parser's message. `parse` turns each such input
into the JSON-RPC error that answers it, with the request's `id` whenever it can be read (a tolerant scan of the
top-level object, since the strict parser has refused the text):

- deeper than `MAX_MESSAGE_DEPTH` levels: -32600, naming the limit (checked before any parser recurses);
- not UTF-8, or a string holding a lone surrogate: -32602 naming the defect (pydantic's parser, and so the SDK's
  Streamable HTTP transport, cannot carry such a string to a verb, so no transport does);
- not JSON: -32700 when no id can be read, else -32600;
- JSON that is not a JSON-RPC message: -32600.
"""

from __future__ import annotations

import json
import re
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from mcp_harness.jsondepth import MAX_MESSAGE_DEPTH, text_depth_exceeds

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
"""A JSON string token (an unterminated one runs to the end); its bytes need not be valid UTF-8."""
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_QUOTED = re.compile(rb'"[^"]*"')
_STRINGS_OR_BRACKETS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")
_WHITESPACE = b" \t\r\n"


def error(request_id: types.RequestId | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def parse(raw: bytes) -> types.JSONRPCMessage | types.JSONRPCError:
    """The message `raw` holds, or (as a `JSONRPCError` to send back) why it is refused."""
    if too_deep(raw):
        return error(
            tolerant_id(raw),
            types.INVALID_REQUEST,
            f"Invalid request: the message nests deeper than {MAX_MESSAGE_DEPTH} levels of objects and arrays "
            "(the limit).",
        )
    try:
        message = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            return _unparsable(raw, exc)
    else:
        # The notification model ignores unknown members, so a request whose id is unusable (null, a bool, a
        # fraction) would pass as a notification and never be answered.
        if not isinstance(message, types.JSONRPCNotification) or b'"id"' not in raw or "id" not in json.loads(raw):
            return message
    try:
        decoded = json.loads(raw)
    except ValueError:
        decoded = None
    request_id = _id_of(decoded) if decoded is not None else tolerant_id(raw)
    if isinstance(decoded, dict) and "method" not in decoded and ("result" in decoded or "error" in decoded):
        request_id = None  # a malformed reply: its id is one of ours, and replies are never answered with it
    return error(
        request_id,
        types.INVALID_REQUEST,
        'Invalid request: a JSON-RPC 2.0 message is one object with "jsonrpc": "2.0" and a "method" (a request '
        'also has an "id", a string or an integer) or, as a reply, an "id" with a "result" or an "error".',
    )


def _unparsable(raw: bytes, exc: ValidationError) -> types.JSONRPCError:
    """The answer to text the strict parser refused: an encoding defect, or not JSON at all."""
    request_id = tolerant_id(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        problem = f"the message is not valid UTF-8 (byte 0x{raw[bad.start]:02x} at offset {bad.start})"
        return _encoding_error(request_id, problem)
    try:
        lenient = json.loads(text)  # Python's parser takes lone surrogates, which pydantic's refuses
    except ValueError:
        detail = str(exc.errors()[0]["msg"]).removeprefix("Invalid JSON: ")
        if request_id is None:
            return error(None, types.PARSE_ERROR, f"Parse error: the message is not valid JSON ({detail}).")
        return error(request_id, types.INVALID_REQUEST, f"Invalid request: the message is not valid JSON ({detail}).")
    if _has_lone_surrogate(lenient):
        problem = "a string in the message holds a lone surrogate (a \\ud800-\\udfff escape without its pair)"
        return _encoding_error(_id_of(lenient), problem)
    detail = str(exc.errors()[0]["msg"]).removeprefix("Invalid JSON: ")
    return error(request_id, types.INVALID_REQUEST, f"Invalid request: the message cannot be read ({detail}).")


def _encoding_error(request_id: types.RequestId | None, problem: str) -> types.JSONRPCError:
    if request_id is None:
        return error(None, types.PARSE_ERROR, f"Parse error: {problem}; JSON text must be valid Unicode.")
    return error(request_id, types.INVALID_PARAMS, f"Invalid params: {problem}; JSON text must be valid Unicode.")


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _id_of(value: Any) -> types.RequestId | None:
    """A usable request id from a decoded message: a string or an integer (never a bool)."""
    found = value.get("id") if isinstance(value, dict) else None
    if isinstance(found, str) and not _has_lone_surrogate(found):  # the reply must be writable
        return found
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def too_deep(raw: bytes, limit: int = MAX_MESSAGE_DEPTH) -> bool:
    """Whether `raw` nests deeper than `limit`: `text_depth_exceeds`, which walks bytes one at a time in Python, given
    only the structure. With no more brackets than the limit it cannot; otherwise escaped backslashes, escaped quotes,
    every byte but brackets and quotes, and then each (now escape-free) string are dropped, all in C, leaving the
    brackets outside strings for the walk (a large write full of code costs a few milliseconds, not a hundred)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    skeleton = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    return text_depth_exceeds(_QUOTED.sub(b"", skeleton), limit)


def tolerant_id(raw: bytes) -> types.RequestId | None:
    """The top-level `"id"` of a JSON object, read without parsing the rest of it (which may be broken: invalid
    bytes, lone surrogates, truncation, too deep). None when the text is not an object or has no usable id."""
    i = _skip_whitespace(raw, 0)
    if raw[i : i + 1] != b"{":
        return None
    i += 1
    while True:
        i = _skip_whitespace(raw, i)
        key = _STRING.match(raw, i)
        if key is None:
            return None
        i = _skip_whitespace(raw, key.end())
        if raw[i : i + 1] != b":":
            return None
        i = _skip_whitespace(raw, i + 1)
        if key.group() == b'"id"':
            return _scalar_id(raw, i)
        i = _skip_value(raw, i)
        if i < 0:
            return None
        i = _skip_whitespace(raw, i)
        if raw[i : i + 1] != b",":
            return None
        i += 1


def _scalar_id(raw: bytes, i: int) -> types.RequestId | None:
    if (string := _STRING.match(raw, i)) is not None:
        try:
            value = json.loads(string.group())
        except ValueError:  # unterminated, or not UTF-8
            return None
        return value if isinstance(value, str) and not _has_lone_surrogate(value) else None
    if (integer := _INTEGER.match(raw, i)) is not None:
        return int(integer.group())
    return None


def _skip_whitespace(raw: bytes, i: int) -> int:
    while i < len(raw) and raw[i] in _WHITESPACE:
        i += 1
    return i


def _skip_value(raw: bytes, i: int) -> int:
    """The offset just past the JSON value at `i`, or -1 when the text ends inside it."""
    if (string := _STRING.match(raw, i)) is not None:
        return string.end() if string.group().endswith(b'"') and string.end() - i > 1 else -1
    if raw[i : i + 1] not in (b"[", b"{"):
        end = i
        while end < len(raw) and raw[end] not in b",}] \t\r\n":
            end += 1
        return end if end > i else -1
    depth = 0
    for token in _STRINGS_OR_BRACKETS.finditer(raw, i):
        opened = token.group()
        if opened in (b"[", b"{"):
            depth += 1
        elif opened in (b"]", b"}"):
            depth -= 1
            if depth == 0:
                return token.end()
    return -1


__all__ = ["error", "parse", "tolerant_id", "too_deep"]
