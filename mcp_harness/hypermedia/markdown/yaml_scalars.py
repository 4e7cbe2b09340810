"""Scalars and flow collections for the frontmatter YAML reader (`yaml`): core-schema resolution,
quoted scalars with their escapes and line folding, block-scalar folding, `[…]` / `{…}` on one logical line, and
node properties (anchors, aliases and tags, resolved as the `yaml` package's core schema resolves them).

Split from the block-structure reader so each stays readable; see `yaml` for why we read YAML ourselves.
"""

from __future__ import annotations

import math
import re
from typing import Any

from mcp_harness.hypermedia.markdown.jsutil import to_js_string


class YamlError(ValueError):
    """Text this reader does not accept (malformed, or a YAML feature outside the frontmatter subset)."""


_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+\Z|[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)\Z")
_INF = re.compile(r"[-+]?\.(?:inf|Inf|INF)\Z")
_NAN = re.compile(r"\.(?:nan|NaN|NAN)\Z")
_NULL = re.compile(r"(?:~|[Nn]ull|NULL)?\Z")
_BOOL = re.compile(r"(?:[Tt]rue|TRUE|[Ff]alse|FALSE)\Z")
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def resolve_plain(s: str) -> Any:
    """The core-schema value of a plain scalar."""
    if _NULL.match(s):
        return None
    if _BOOL.match(s):
        return s[0] in "tT"
    if _OCT.match(s):
        return int(s[2:], 8)
    if _HEX.match(s):
        return int(s[2:], 16)
    if _INT.match(s):
        return int(s)
    if _FLOAT.match(s):
        return float(s)
    if _INF.match(s):
        return -math.inf if s[0] == "-" else math.inf
    if _NAN.match(s):
        return math.nan
    return s


def key_string(key: Any) -> str:
    # A JS object key: the `yaml` package stringifies non-string keys, null becoming "".
    return "" if key is None else to_js_string(key)


def strip_comment(text: str) -> str:
    m = re.search(r"[ \t]#", text)
    return (text[: m.start()] if m else text).rstrip(" \t")


def unsupported(text: str) -> None:
    if text[:1] in ("&", "*", "!", "%", "@", "`"):
        raise YamlError(f"unsupported YAML syntax: {text[:20]!r}")


def fold_block(lines: list[str]) -> str:
    out = ""
    prev: str | None = None
    empties = 0
    for line in lines:
        if line == "":
            empties += 1
            continue
        if prev is None:
            out += "\n" * empties
        else:
            normal = not prev.startswith((" ", "\t")) and not line.startswith((" ", "\t"))
            out += ("\n" * empties or " ") if normal else "\n" * (empties + 1)
        out += line
        prev = line
        empties = 0
    return out


def quoted_end(text: str) -> int:
    """Index just past the closing quote of the quoted scalar `text` starts with, or -1."""
    quote = text[0]
    i = 1
    while i < len(text):
        c = text[i]
        if quote == '"' and c == "\\":
            i += 2
            continue
        if c == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return -1


def unquote_line(quoted: str) -> str:
    """The value of a complete quoted scalar, possibly spanning lines (flow folding applies)."""
    quote, body = quoted[0], quoted[1:-1]
    out: list[str] = []
    protected = 0  # output up to here came from escapes, so line folding must not trim it
    lines = body.split("\n")
    for idx, line in enumerate(lines):
        if idx > 0:
            line = line.lstrip(" \t")
        if idx > 0 and line == "" and idx < len(lines) - 1:
            out.append("\n")
            protected = len("".join(out))
            continue
        k = 0
        escaped_break = False
        while k < len(line):
            c = line[k]
            if quote == "'" and c == "'":
                out.append("'")
                k += 2
            elif quote == '"' and c == "\\":
                if k + 1 >= len(line):
                    escaped_break = True
                    protected = len("".join(out))
                    k += 1
                    continue
                e = line[k + 1]
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                    k += 2
                elif e in _HEX_ESCAPES:
                    width = _HEX_ESCAPES[e]
                    digits = line[k + 2 : k + 2 + width]
                    if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                        raise YamlError(f"bad escape \\{e}{digits}")
                    out.append(chr(int(digits, 16)))
                    k += 2 + width
                else:
                    raise YamlError(f"bad escape \\{e}")
                protected = len("".join(out))
            else:
                out.append(c)
                k += 1
        if idx < len(lines) - 1:
            text = "".join(out)
            kept = text[:protected] + text[protected:].rstrip(" \t")
            out = [kept]
            # A break folds to a space unless blank lines follow (each becomes a newline) or it was escaped.
            next_blank = idx + 1 < len(lines) - 1 and lines[idx + 1].strip(" \t") == ""
            if not escaped_break and not next_blank:
                out.append(" ")
            protected = len(kept)
    return "".join(out)


def flow_end(text: str) -> int:
    """Index just past the flow collection `text` starts with, or -1 while it is still open."""
    depth = 0
    i = 0
    while i < len(text):
        c = text[i]
        if c in ('"', "'"):
            end = quoted_end(text[i:])
            if end == -1:
                return -1
            i += end
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


class FlowReader:
    """`[a, "b", {c: d}]` and `{a: 1, b}` on one logical line."""

    def __init__(self, text: str, anchors: Anchors | None = None) -> None:
        self.text = text
        self.anchors = anchors if anchors is not None else Anchors()

    def _ws(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in " \t\n":
            i += 1
        return i

    def value(self, i: int) -> tuple[Any, int]:
        i = self._ws(i)
        if self.text[i : i + 1] == "*":
            name, rest = alias_name(self.text[i:], flow=True)
            return self.anchors.resolve(name), len(self.text) - len(rest)
        anchor, tag, rest = node_props(self.text[i:], flow=True)
        i = len(self.text) - len(rest)
        value, i = self._bare(i, tag)
        return self.anchors.define(anchor, value), i

    def _bare(self, i: int, tag: str | None) -> tuple[Any, int]:
        c = self.text[i : i + 1]
        if c in ("[", "{"):
            value, i = self._collection(i + 1, "]" if c == "[" else "}")
            return tagged_collection(tag, value), i
        if c in ('"', "'"):
            end = quoted_end(self.text[i:])
            if end == -1:
                raise YamlError("unterminated quoted scalar")
            text = unquote_line(self.text[i : i + end])
            return (tagged_scalar(tag, text) if tag else text), i + end
        m = re.compile(r"(?:[^,\[\]{}:#]|:(?![ \t,\[\]{}]|\Z)|(?<![ \t])#)*").match(self.text, i)
        assert m is not None
        raw = m[0].strip(" \t")
        unsupported(raw)
        return (tagged_scalar(tag, raw) if tag else resolve_plain(raw)), m.end()

    def _collection(self, i: int, close: str) -> tuple[Any, int]:
        items: list[Any] = []
        pairs: dict[str, Any] = {}
        while True:
            i = self._ws(i)
            if self.text[i : i + 1] == close:
                return (items if close == "]" else pairs), i + 1
            key, i = self.value(i)
            i = self._ws(i)
            value: Any = None
            is_pair = self.text[i : i + 1] == ":"
            if is_pair:
                value, i = self.value(i + 1)
                i = self._ws(i)
            if close == "]":
                items.append({key_string(key): value} if is_pair else key)
            else:
                pairs[key_string(key)] = value
            if self.text[i : i + 1] == ",":
                i += 1
            elif self.text[i : i + 1] != close:
                raise YamlError("expected , or a closing bracket in a flow collection")


# --- node properties: anchors, aliases, tags ------------------------------------------------------------------------

CORE_TAG = "tag:yaml.org,2002:"
MAX_ALIAS_USES = 100
"""Uses of one anchor, as the `yaml` package's `maxAliasCount`: more is taken for a resource-exhaustion attack."""
MAX_EXPANDED_NODES = 10_000
"""Nodes the document may hold once every alias is expanded (a billion laughs stays small until it is encoded)."""
_SCALAR_TAGS = frozenset({"null", "bool", "int", "float"})
_UNSUPPORTED_TAGS = frozenset({"binary", "timestamp", "set", "omap", "pairs", "merge", "value", "yaml"})


def node_props(text: str, *, flow: bool = False) -> tuple[str | None, str | None, str]:
    """The `&anchor` and `!tag` leading a node (in either order) and the text after them. A tag comes back
    resolved: `!!int` as `tag:yaml.org,2002:int`, `!<…>` verbatim, `!` and local `!name` as written."""
    anchor: str | None = None
    tag: str | None = None
    stop = r"[^\s,\[\]{}]*" if flow else r"\S*"
    while text[:1] in ("&", "!"):
        if text.startswith("!<"):
            end = text.find(">")
            if end == -1:
                raise YamlError("unterminated verbatim tag")
            token, resolved = text[: end + 1], text[2:end]
        else:
            token = re.match("[&!]" + stop, text)[0]  # pyright: ignore[reportOptionalSubscript]
            resolved = token
        if token[0] == "&":
            if anchor is not None or len(token) == 1:
                raise YamlError(f"bad anchor {token!r}")
            anchor = token[1:]
        else:
            if tag is not None:
                raise YamlError("a node may have one tag")
            if resolved.startswith("!!"):
                resolved = CORE_TAG + resolved[2:]
            elif re.match(r"![\w-]*!", resolved):
                raise YamlError(f"tag handle in {token!r} has no %TAG directive")
            tag = resolved
        text = text[len(token) :].lstrip(" \t")
    return anchor, tag, text


def alias_name(text: str, *, flow: bool = False) -> tuple[str, str]:
    """`(name, rest)` of an alias `*name` at the start of `text`."""
    name = re.match(r"\*([^\s,\[\]{}]*)" if flow else r"\*(\S*)", text)[1]  # pyright: ignore[reportOptionalSubscript]
    if not name:
        raise YamlError("an alias needs a name")
    return name, text[len(name) + 1 :]


def tagged_scalar(tag: str, text: str) -> Any:
    """A scalar's value under an explicit tag, from its source text, as the `yaml` package's core schema: `!!str`
    and `!` keep the text; `!!int`, `!!float`, `!!bool`, `!!null` take it when it has that form (quoted or not),
    else keep the text (the package warns "Unresolved tag"), as they do for a local or unknown tag."""
    if not tag.startswith(CORE_TAG):
        return text
    name = tag.removeprefix(CORE_TAG)
    if name in _UNSUPPORTED_TAGS or name in ("map", "seq"):
        raise YamlError(f"unsupported tag !!{name} on a scalar")
    if name not in _SCALAR_TAGS:
        return text
    value = resolve_plain(text)
    fits = {
        "null": value is None,
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, float),
    }[name]
    return value if fits else text


def tagged_collection(tag: str | None, value: Any) -> Any:
    """A mapping or sequence under an explicit tag: `!!map` and `!!seq` must match it; local and unknown tags leave
    it as it is (the package warns); other core tags are refused."""
    if tag is None or not tag.startswith(CORE_TAG):
        return value
    name = tag.removeprefix(CORE_TAG)
    if (name == "map" and isinstance(value, dict)) or (name == "seq" and isinstance(value, list)):
        return value  # pyright: ignore[reportUnknownVariableType]
    raise YamlError(f"tag !!{name} does not fit a {'mapping' if isinstance(value, dict) else 'sequence'}")


class Anchors:
    """The anchors of one document, and the uses of each (aliases share the anchored value; see `expanded_size`)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.uses: dict[str, int] = {}

    def define(self, name: str | None, value: Any) -> Any:
        if name is not None:
            self.values[name] = value
            self.uses[name] = 0
        return value

    def resolve(self, name: str) -> Any:
        if name not in self.values:
            raise YamlError(f"unresolved alias *{name} (the anchor must be set before the alias)")
        self.uses[name] += 1
        if self.uses[name] > MAX_ALIAS_USES:
            raise YamlError(f"alias *{name} is used more than {MAX_ALIAS_USES} times")
        return self.values[name]


def check_expanded_size(value: Any) -> None:
    """Refuse a document whose aliases expand past `MAX_EXPANDED_NODES` (counted once per shared value)."""
    sizes: dict[int, int] = {}

    def size(item: Any) -> int:
        if not isinstance(item, dict | list):
            return 1
        if id(item) in sizes:  # pyright: ignore[reportUnknownArgumentType]
            return sizes[id(item)]  # pyright: ignore[reportUnknownArgumentType]
        children = item.values() if isinstance(item, dict) else item  # pyright: ignore[reportUnknownVariableType]
        total = 1 + sum(size(child) for child in children)  # pyright: ignore[reportUnknownVariableType]
        sizes[id(item)] = total  # pyright: ignore[reportUnknownArgumentType]
        if total > MAX_EXPANDED_NODES:
            raise YamlError(f"the frontmatter expands to more than {MAX_EXPANDED_NODES} values through its aliases")
        return total

    size(value)
