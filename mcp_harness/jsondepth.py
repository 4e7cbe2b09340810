"""Nesting bounds for JSON that arrives from outside.

Parsers and validators recurse: past about 200 levels pydantic's JSON parser gives up and Python's `json` raises
`RecursionError`, so a deep enough value would otherwise fail somewhere unpredictable. The bounds are explicit
instead, and every refusal names them. A verb's input may nest `MAX_INPUT_DEPTH` levels (a tool error says so); a
whole JSON-RPC message `MAX_MESSAGE_DEPTH` (the transport answers deeper ones with a JSON-RPC error), which leaves
room for the envelope around a verb input, so an over-deep input usually gets the verb's more helpful message.
"""

from __future__ import annotations

from typing import Any

MAX_INPUT_DEPTH = 64
"""Levels of arrays and objects a verb's input may nest."""
MAX_MESSAGE_DEPTH = 128
"""Levels of arrays and objects a whole JSON-RPC message may nest."""


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests arrays/objects deeper than `limit` levels (iterative: never recurses)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()  # pyright: ignore[reportUnknownMemberType]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)  # pyright: ignore[reportUnknownVariableType]
    return False


def text_depth_exceeds(text: bytes | str, limit: int) -> bool:
    """Whether raw JSON text opens more than `limit` nested arrays/objects, scanned without parsing (brackets inside
    strings do not count), so it can be asked before a parser that would recurse."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    depth = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def without_surrogates(value: Any) -> Any:
    """The value with every lone surrogate (valid in a JSON escape, not in UTF-8) replaced by U+FFFD, in keys and
    strings alike: what a log can store. Iterative over a value already bounded by `depth_exceeds`."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace") if _has_surrogate(value) else value
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def surrogate_paths(value: Any, path: str = "$") -> list[str]:
    """JSONPath-like paths of the strings (or keys) in `value` that hold a lone surrogate."""
    if isinstance(value, str):
        return [path] if _has_surrogate(value) else []
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():  # pyright: ignore[reportUnknownVariableType]
            where = f"{path}.{key}"
            if isinstance(key, str) and _has_surrogate(key):
                out.append(f"{path} (a key)")
            out += surrogate_paths(item, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            out += surrogate_paths(item, f"{path}[{i}]")
    return out


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


__all__ = [
    "MAX_INPUT_DEPTH",
    "MAX_MESSAGE_DEPTH",
    "depth_exceeds",
    "surrogate_paths",
    "text_depth_exceeds",
    "without_surrogates",
]
