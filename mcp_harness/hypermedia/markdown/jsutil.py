"""JavaScript semantics the markdown port depends on: whitespace, trimming, number and JSON text, string coercion.

The markdown dialect is defined by the official Seed client's JavaScript (`@seed-hypermedia/client`), and several of
its decisions hinge on JS built-ins whose Python namesakes behave differently: `\\s` and `.trim()` cover a different
set of characters than Python's `\\s` and `str.strip()`, `JSON.stringify(1.0)` is `1` where `json.dumps` writes
`1.0`, and `String(x)` formats numbers, booleans and arrays its own way. Collecting the JS versions here keeps the
ported modules line-for-line comparable with the reference and makes parse → render → parse agree with the client
byte for byte.
"""

from __future__ import annotations

import functools
import json
import math
import unicodedata
from collections.abc import Mapping
from typing import Any

WS_CHARS = (
    "\t\n\v\f\r \u00a0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
"""What JS `\\s` matches and `String.prototype.trim` removes (WhiteSpace plus LineTerminator)."""
WS_CLASS_BODY = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
"""The members of JS `\\s`, for composing regex classes such as `[^<>…]`."""
WS = f"[{WS_CLASS_BODY}]"
"""JS `\\s` as a Python regex class."""
NWS = f"[^{WS_CLASS_BODY}]"
"""JS `\\S` as a Python regex class."""
DOT = "[^\\n\\r\\u2028\\u2029]"
"""JS `.` (without the `s` flag): anything but a line terminator; Python's `.` only excludes `\\n`."""


# CLDR root collation order of ASCII whitespace, punctuation and symbols, all before digits and letters.
_PUNCT_ORDER = "\t \n_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"


def trim(s: str) -> str:
    return s.strip(WS_CHARS)


def is_ws(ch: str) -> bool:
    return ch != "" and ch in WS_CHARS


def number_text(x: float | int) -> str:
    """`String(x)` / `JSON.stringify(x)` for a finite number: shortest round-trip digits, JS exponent thresholds."""
    if isinstance(x, int):
        return str(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    # repr gives the shortest round-trip digits, as JS does; only the layout differs. The value is
    # digits × 10^scale, and n places the decimal point as in ECMA-262 Number::toString.
    scale = (int(exp_text) if exp_text else 0) - len(frac)
    digits = (whole + frac).lstrip("0")
    stripped = digits.rstrip("0")
    scale += len(digits) - len(stripped)
    digits = stripped
    k = len(digits)
    n = k + scale
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        body = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def to_js_string(value: Any) -> str:
    """`String(value)` for the JSON-like values a YAML or JSON parse yields."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number_text(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        return ",".join("" if item is None else to_js_string(item) for item in value)
    return "[object Object]"


def truthy(value: Any) -> bool:
    """JS truthiness: empty string, 0, NaN, null and false are falsy; every object and array is truthy."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def json_stringify(value: Any) -> str:
    """`JSON.stringify(value)`: compact, non-ASCII kept, numbers in JS form, insertion-ordered keys."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "null" if math.isnan(value) or math.isinf(value) else number_text(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}:{json_stringify(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(json_stringify(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def json_parse(text: str) -> Any:
    """`JSON.parse`: refuses the NaN and Infinity literals Python's json module would accept."""

    def refuse(name: str) -> Any:
        raise ValueError(f"invalid JSON literal {name!r}")

    return json.loads(text, parse_constant=refuse)


def sort_keys_deep(value: Any) -> Any:
    """Object keys sorted at every depth, as the client does before writing attributes into a comment."""
    if isinstance(value, list | tuple):
        return [sort_keys_deep(v) for v in value]
    if isinstance(value, Mapping):
        return {k: sort_keys_deep(value[k]) for k in sorted(value)}
    return value


@functools.lru_cache(maxsize=4096)
def locale_compare_key(s: str) -> tuple[tuple[tuple[int, int | str], ...], tuple[int, ...]]:
    """An approximation of `String.prototype.localeCompare` (ICU root collation) that agrees with it on metadata
    keys: punctuation before digits before letters, letters compared without case or accents first, then
    lowercase before uppercase."""
    primary: list[tuple[int, int | str]] = []
    tertiary: list[int] = []
    for ch in s:
        base = unicodedata.normalize("NFD", ch)[0]
        if base.isalpha():
            primary.append((2, base.casefold()))
            tertiary.append(1 if ch.isupper() else 0)
        elif base.isdigit():
            primary.append((1, base))
            tertiary.append(0)
        else:
            primary.append((0, _PUNCT_ORDER.find(ch) if ch in _PUNCT_ORDER else 100 + ord(ch)))
            tertiary.append(0)
    return tuple(primary), tuple(tertiary)


def comment_json(value: Any) -> str:
    """Attributes as the client writes them inside an HTML comment: sorted JSON with `--` broken up, since `--`
    may not appear in a comment."""
    return json_stringify(sort_keys_deep(value)).replace("--", "-\\u002d")
