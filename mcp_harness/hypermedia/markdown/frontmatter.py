"""Document metadata ↔ YAML frontmatter, read and written the way the Seed client does it.

Ported from the client's `parseFrontmatter` and `emitFrontmatter`. Metadata is the document's `SetAttributes`
state (name, summary, icon, cover, theme.headerLayout, …). The client writes it with the `yaml` package's
`stringify` (line width 0, a fixed key order) and reads it back with its core schema, then coerces a few keys
(`title:` is an alias for `name:`, string keys become strings, `showOutline` and `showActivity` booleans). The
writer below ports the parts of `stringify` that JSON-like metadata reaches — plain, quoted and literal-block
strings, numbers, booleans, null, nested maps and sequences — so our markdown carries the same frontmatter bytes as
the client's, and `yaml` reads both back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from mcp_harness.hypermedia.markdown.jsutil import locale_compare_key, number_text, to_js_string, trim, truthy
from mcp_harness.hypermedia.markdown.yaml import YamlError, parse_yaml

FM_KEY_ORDER = (
    "name", "summary", "icon", "cover", "displayAuthor", "displayPublishTime", "schema", "childrenSchema",
    "schemaDefinition", "siteUrl", "layout", "theme", "contentWidth", "childrenType", "showOutline", "showActivity",
    "seedExperimentalLogo", "seedExperimentalHomeOrder", "importCategories", "importTags",
)  # fmt: skip
METADATA_STRING_KEYS = (
    "name", "summary", "displayAuthor", "displayPublishTime", "icon", "cover", "siteUrl", "layout",
    "seedExperimentalLogo", "importCategories", "importTags", "seedExperimentalHomeOrder", "contentWidth",
    "childrenType",
)  # fmt: skip
METADATA_BOOLEAN_KEYS = ("showOutline", "showActivity")

_CLOSE_RE = re.compile(r"\n---[ \t]*(?:\n|\Z)")
_NOT_PLAIN = re.compile(r"^[\n\t ,\[\]{}#&*!|>'\"%@`]|^[?-]\Z|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]\Z")
_DOC_MARKER = re.compile(r"^(?:%|---|\.\.\.)", re.MULTILINE)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_CORE_TAG_TESTS = tuple(
    re.compile(p)
    for p in (
        r"(?:~|[Nn]ull|NULL)?\Z",
        r"(?:[Tt]rue|TRUE|[Ff]alse|FALSE)\Z",
        r"0o[0-7]+\Z",
        r"[-+]?[0-9]+\Z",
        r"0x[0-9a-fA-F]+\Z",
        r"(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)\Z",
        r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+\Z",
        r"[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)\Z",
    )
)
_SHORT_ESCAPES = {"0000": "\\0", "0007": "\\a", "000b": "\\v", "001b": "\\e"}
_BLOCK_END_NEWLINES = re.compile(r"(?:^|(?<!\n))\n+(?!\n|\Z)")
_INDENT_STEP = "  "


def parse_frontmatter(markdown: str) -> tuple[str, dict[str, Any]]:
    """The markdown after its leading `---` YAML block, and the metadata the block holds (`parseFrontmatter`)."""
    trimmed = markdown.removeprefix("\ufeff")
    if not trimmed.startswith("---"):
        return markdown, {}
    first_line_end = trimmed.find("\n")
    if first_line_end == -1 or trim(trimmed[:first_line_end]) != "---":
        return markdown, {}
    close = _CLOSE_RE.search(trimmed, first_line_end)
    if not close:
        return markdown, {}
    yaml_block = trimmed[first_line_end + 1 : close.start()]
    rest = trimmed[close.end() :]
    try:
        parsed = {} if trim(yaml_block) == "" else parse_yaml(yaml_block)
    except (YamlError, ValueError, RecursionError):
        # The client's rule: frontmatter that is not valid YAML is not frontmatter, and stays in the content.
        return markdown, {}
    if isinstance(parsed, list):
        parsed = {str(i): v for i, v in enumerate(parsed)}  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(parsed, dict) or not parsed:
        return rest, {}
    metadata: dict[str, Any] = {k: v for k, v in parsed.items() if k != "title"}  # pyright: ignore[reportUnknownVariableType]
    if "name" not in metadata and parsed.get("title") is not None:
        metadata["name"] = to_js_string(parsed["title"])
    for key in METADATA_STRING_KEYS:
        if key in metadata and not isinstance(metadata[key], str):
            if metadata[key] is None:
                del metadata[key]
            else:
                metadata[key] = to_js_string(metadata[key])
    for key in METADATA_BOOLEAN_KEYS:
        if key in metadata and not isinstance(metadata[key], bool):
            metadata[key] = truthy(metadata[key])
    return rest, metadata


def emit_frontmatter(metadata: Mapping[str, Any] | None) -> str:
    """`---\\n<yaml>\\n---\\n`, every key in the client's order; `---\\n---\\n` when there is no metadata."""
    if not metadata:
        return "---\n---\n"
    return "---\n" + _mapping(metadata, "") + "\n---\n"


def _sort_key(key: str) -> tuple[int, Any]:
    rank = FM_KEY_ORDER.index(key) if key in FM_KEY_ORDER else len(FM_KEY_ORDER)
    return rank, locale_compare_key(key)


def _mapping(value: Mapping[str, Any], indent: str) -> str:
    if not value:
        return "{}"
    keys = sorted((str(k) for k in value), key=_sort_key)
    lines = [_pair(key, value[key], indent + _INDENT_STEP) for key in keys]
    return f"\n{indent}".join(lines)


def _sequence(value: list[Any] | tuple[Any, ...], indent: str) -> str:
    if not value:
        return "[]"
    return f"\n{indent}".join("- " + _node(item, indent + _INDENT_STEP) for item in value)


def _pair(key: str, value: Any, indent: str) -> str:
    out = _string(key, indent, implicit_key=True) + ":"
    if isinstance(value, Mapping | list | tuple) and value:
        return out + f"\n{indent}" + _node(value, indent)
    text = _node(value, indent)
    return out + ("" if text == "" or text.startswith("\n") else " ") + text


def _node(value: Any, indent: str) -> str:
    if isinstance(value, Mapping):
        return _mapping(value, indent)  # pyright: ignore[reportUnknownArgumentType]
    if isinstance(value, list | tuple):
        return _sequence(value, indent)  # pyright: ignore[reportUnknownArgumentType]
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return "-0" if value == 0 and math.copysign(1, value) < 0 else number_text(value)
    return _string(str(value), indent, implicit_key=False)


def _string(value: str, indent: str, *, implicit_key: bool) -> str:
    if _CONTROL.search(value):
        return _double_quoted(value, indent, implicit_key)
    return _plain(value, indent, implicit_key)


def _plain(value: str, indent: str, implicit_key: bool) -> str:
    if implicit_key and "\n" in value:
        return _quoted(value, indent, implicit_key)
    if _NOT_PLAIN.search(value):
        if implicit_key or "\n" not in value:
            return _quoted(value, indent, implicit_key)
        return _block(value, indent, implicit_key)
    if not implicit_key and "\n" in value:
        return _block(value, indent, implicit_key)
    if _DOC_MARKER.search(value) and implicit_key and indent == _INDENT_STEP:
        return _quoted(value, indent, implicit_key)
    # A plain scalar that would read back as null, a boolean or a number must be quoted to stay a string.
    if any(test.match(value) for test in _CORE_TAG_TESTS):
        return _quoted(value, indent, implicit_key)
    return value


def _quoted(value: str, indent: str, implicit_key: bool) -> str:
    if '"' in value and "'" not in value:
        return _single_quoted(value, indent, implicit_key)
    return _double_quoted(value, indent, implicit_key)


def _single_quoted(value: str, indent: str, implicit_key: bool) -> str:
    if (implicit_key and "\n" in value) or re.search(r"[ \t]\n|\n[ \t]", value):
        return _double_quoted(value, indent, implicit_key)
    ind = indent or ("  " if _DOC_MARKER.search(value) else "")
    return "'" + re.sub(r"\n+", lambda m: m[0] + "\n" + ind, value.replace("'", "''")) + "'"


def _json_string(value: str) -> str:
    # JSON.stringify escapes lone surrogates; json.dumps would pass them through.
    text = json.dumps(value, ensure_ascii=False)
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m[0]):04x}", text)


def _double_quoted(value: str, indent: str, implicit_key: bool) -> str:
    text = _json_string(value)
    ind = indent or ("  " if _DOC_MARKER.search(value) else "")
    out = ""
    start = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == " " and text[i + 1 : i + 3] == "\\n":
            # A space before a folded newline is escaped, or folding would eat it.
            out += text[start:i] + "\\ "
            i += 1
            start = i
            ch = "\\"
        if ch == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt == "u":
                out += text[start:i]
                code = text[i + 2 : i + 6]
                if code in _SHORT_ESCAPES:
                    out += _SHORT_ESCAPES[code]
                elif code.startswith("00"):
                    out += "\\x" + code[2:]
                else:
                    out += text[i : i + 6]
                i += 5
                start = i + 1
            elif nxt == "n":
                if implicit_key or text[i + 2 : i + 3] == '"' or len(text) < 40:
                    i += 1
                else:
                    out += text[start:i] + "\n\n"
                    while text[i + 2 : i + 4] == "\\n" and text[i + 4 : i + 5] != '"':
                        out += "\n"
                        i += 2
                    out += ind
                    if text[i + 2 : i + 3] == " ":
                        out += "\\"
                    i += 1
                    start = i + 1
            else:
                i += 1
        i += 1
    return out + text[start:] if start else text


def _block(value: str, indent: str, implicit_key: bool) -> str:
    """A literal block scalar (`|`, `|-`, `|+`): with line width 0 the client never folds."""
    if re.search(r"\n[\t ]+\Z", value):
        return _quoted(value, indent, implicit_key)
    ind = indent or ("  " if _DOC_MARKER.search(value) else "")
    end_start = len(value)
    while end_start > 0 and value[end_start - 1] in "\n\t ":
        end_start -= 1
    end = value[end_start:]
    nl = end.find("\n")
    if nl == -1:
        chomp = "-"
    elif value == end or nl != len(end) - 1:
        chomp = "+"
    else:
        chomp = ""
    if end:
        value = value[: -len(end)]
        end = end.removesuffix("\n")
        end = _BLOCK_END_NEWLINES.sub(lambda m: m[0] + ind, end)
    start_with_space = False
    start_nl = -1
    k = 0
    while k < len(value):
        if value[k] == " ":
            start_with_space = True
        elif value[k] == "\n":
            start_nl = k
        else:
            break
        k += 1
    lead = value[: start_nl + 1]
    if lead:
        value = value[len(lead) :]
        lead = re.sub(r"\n+", lambda m: m[0] + ind, lead)
    header = ("2" if ind else "1") if start_with_space else ""
    header += chomp
    value = re.sub(r"\n+", lambda m: m[0] + ind, value)
    return f"|{header}\n{ind}{lead}{value}{end}"
