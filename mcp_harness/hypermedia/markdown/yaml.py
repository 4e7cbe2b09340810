"""A YAML 1.2 (core schema) reader for document frontmatter, for the subset frontmatter uses.

The Seed client reads frontmatter with the `yaml` npm package (core schema: `yes` stays a string, `0o17` is 15, dates
stay strings), and mcp-harness has no YAML dependency; PyYAML would not do anyway, since it implements YAML 1.1 and
would turn `yes`, `on` and `2024-01-02` into other types. This reader covers what frontmatter holds and what the
client's writer (`frontmatter.emit_frontmatter`) produces: block mappings and sequences, flow collections,
plain, single- and double-quoted scalars (multi-line, with folding and escapes), literal and folded block
scalars with chomping and indentation indicators, and node properties: anchors and aliases (an alias shares the
anchored value; an unknown one, or a document that would expand past `MAX_EXPANDED_NODES`, is an error, as the
package's alias limit makes it one) and tags, resolved as the package resolves them (`!!str 123` is "123", `!!int "7"`
is 7, a local `!tag` keeps the text). Anchors or tags on keys, `%TAG` handles, YAML 1.1 types (`!!binary`,
`!!timestamp`, …) and complex keys raise `YamlError`, which the caller treats like the client treats a YAML error:
the frontmatter is not frontmatter.
"""

from __future__ import annotations

import re
from typing import Any

from mcp_harness.hypermedia.markdown.yaml_scalars import (
    Anchors,
    FlowReader,
    YamlError,
    alias_name,
    check_expanded_size,
    flow_end,
    fold_block,
    key_string,
    node_props,
    quoted_end,
    resolve_plain,
    strip_comment,
    tagged_collection,
    tagged_scalar,
    unquote_line,
    unsupported,
)

__all__ = ["YamlError", "parse_yaml", "resolve_plain"]


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _significant(line: str) -> bool:
    stripped = line.strip(" \t")
    return stripped != "" and not stripped.startswith("#")


def _is_seq_entry(content: str) -> bool:
    return content == "-" or content.startswith(("- ", "-\t"))


def parse_yaml(text: str) -> Any:
    """The value of one YAML document (None when it is empty)."""
    parser = _Parser([line.removesuffix("\r") for line in text.split("\n")])
    value = parser.block(-1)
    parser.skip()
    if parser.i < len(parser.lines):
        raise YamlError(f"unexpected content at line {parser.i + 1}")
    check_expanded_size(value)
    return value


class _Parser:
    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.i = 0
        self.anchors = Anchors()

    def skip(self) -> None:
        while self.i < len(self.lines) and not _significant(self.lines[self.i]):
            self.i += 1

    def _line_indent(self) -> int:
        line = self.lines[self.i]
        indent = _indent_of(line)
        if line[indent : indent + 1] == "\t":
            raise YamlError("tabs are not allowed as indentation")
        return indent

    def block(self, parent: int, tag: str | None = None) -> Any:
        """The node whose first line is the next significant line, if it is indented deeper than `parent` (`tag`:
        the explicit tag its properties gave it on an earlier line); an empty node when there is none."""
        self.skip()
        if self.i >= len(self.lines) or (indent := self._line_indent()) <= parent:
            return tagged_scalar(tag, "") if tag else None
        content = self.lines[self.i][indent:]
        if content[:1] in ("&", "!", "*") and tag is None:
            return self._propertied(content, parent)
        if _is_seq_entry(content):
            return tagged_collection(tag, self.sequence(indent))
        if content == "?" or content.startswith("? ") or self._split_key(content) is not None:
            return tagged_collection(tag, self.mapping(indent))
        return self.scalar(content, parent, tag)

    def _propertied(self, content: str, parent: int) -> Any:
        """A node led by an alias, or by an anchor and/or a tag: on this line, or (properties alone on it) on the
        lines below."""
        if content.startswith("*"):
            return self._alias(content)
        anchor, tag, rest = node_props(content)
        if rest == "" or rest.startswith("#"):
            self.i += 1
            return self.anchors.define(anchor, self.block(parent, tag))
        return self.anchors.define(anchor, self.scalar(rest, parent, tag))

    def _alias(self, content: str) -> Any:
        name, rest = alias_name(content)
        if strip_comment(rest).strip(" \t"):
            raise YamlError(f"unexpected text after the alias *{name}")
        self.i += 1
        return self.anchors.resolve(name)

    def sequence(self, n: int) -> list[Any]:
        items: list[Any] = []
        while True:
            self.skip()
            if self.i >= len(self.lines) or self._line_indent() < n:
                break
            if self._line_indent() > n:
                raise YamlError(f"bad indentation at line {self.i + 1}")
            content = self.lines[self.i][n:]
            if not _is_seq_entry(content):
                break
            rest = content[1:]
            rest_stripped = rest.lstrip(" \t")
            if rest_stripped == "" or rest_stripped.startswith("#"):
                self.i += 1
                items.append(self.block(n))
                continue
            # `- a: 1` is a mapping that starts on the dash line: re-read the line with the dash as indentation.
            self.lines[self.i] = " " * (n + 1 + len(rest) - len(rest_stripped)) + rest_stripped
            items.append(self.block(n))
        return items

    def mapping(self, n: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while True:
            self.skip()
            if self.i >= len(self.lines) or self._line_indent() < n:
                break
            if self._line_indent() > n:
                raise YamlError(f"bad indentation at line {self.i + 1}")
            content = self.lines[self.i][n:]
            if content == "?" or content.startswith("? "):
                key, rest = self._explicit_key(content, n)
            else:
                split = self._split_key(content)
                if split is None:
                    break
                key, rest = split
            if key in result:
                raise YamlError(f"duplicate key {key!r}")
            rest = rest.lstrip(" \t")
            anchor, tag, rest = node_props(rest)
            if rest.startswith("*") and anchor is None and tag is None:
                result[key] = self._alias(rest)
            elif rest == "" or rest.startswith("#"):
                self.i += 1
                self.skip()
                if self.i < len(self.lines) and self._line_indent() == n and _is_seq_entry(self.lines[self.i][n:]):
                    result[key] = self.anchors.define(anchor, tagged_collection(tag, self.sequence(n)))
                else:
                    result[key] = self.anchors.define(anchor, self.block(n, tag))
            else:
                result[key] = self.anchors.define(anchor, self.scalar(rest, n, tag))
        return result

    def _explicit_key(self, content: str, n: int) -> tuple[str, str]:
        key_text = strip_comment(content[1:].strip(" \t"))
        key = key_string(resolve_plain(key_text) if key_text else None)
        self.i += 1
        self.skip()
        if self.i < len(self.lines) and self._line_indent() == n:
            line = self.lines[self.i][n:]
            if line == ":" or line.startswith(": "):
                return key, line[1:]
        self.i -= 1
        return key, ""

    def _split_key(self, content: str) -> tuple[str, str] | None:
        """`(key, rest after the colon)` when the line is a `key: value` entry."""
        if content[:1] in ('"', "'"):
            end = quoted_end(content)
            if end == -1:
                return None
            after = content[end:].lstrip(" \t")
            if after == ":" or after.startswith((": ", ":\t")):
                return unquote_line(content[:end]), after[1:]
            return None
        if content[:1] in ("[", "{"):
            return None
        m = re.search(r":(?:[ \t]|\Z)", content)
        if not m or re.search(r"[ \t]#", content[: m.start()]) or content.startswith("#"):
            return None
        key_text = content[: m.start()].rstrip(" \t")
        unsupported(key_text)
        return key_string(resolve_plain(key_text)), content[m.end() :]

    def scalar(self, text: str, n: int, tag: str | None = None) -> Any:
        """A value that starts mid-line (`text`) on the current line; continuation lines sit deeper than `n`.
        With `tag`, a scalar resolves under it (`tagged_scalar`) and a flow collection must fit it."""
        unsupported(text)
        first = text[:1]
        if first in ("[", "{"):
            return tagged_collection(tag, self._flow(text, n))
        if first in ('"', "'", "|", ">"):
            value = self._quoted(text, n) if first in ('"', "'") else self._block_scalar(text, n)
            return tagged_scalar(tag, value) if tag else value
        parts = [strip_comment(text)]
        self.i += 1
        if not text.lstrip().startswith("#") and strip_comment(text) == text.rstrip(" \t"):
            blanks = 0
            while self.i < len(self.lines):
                line = self.lines[self.i]
                if line.strip(" \t") == "":
                    blanks += 1
                    self.i += 1
                    continue
                if _indent_of(line) <= n or line.strip(" \t").startswith("#"):
                    break
                parts.append("\n" * blanks if blanks else " ")
                parts.append(strip_comment(line.strip(" \t")))
                blanks = 0
                self.i += 1
            self.i -= blanks
        value = "".join(parts)
        if re.search(r":(?:[ \t]|\Z)", value):
            raise YamlError("nested mappings are not allowed in compact mappings")
        return tagged_scalar(tag, value) if tag else resolve_plain(value)

    def _quoted(self, text: str, n: int) -> str:
        # Gather physical lines until the closing quote, then unquote them as one folded scalar.
        pieces = [text]
        while quoted_end("\n".join(pieces)) == -1:
            self.i += 1
            if self.i >= len(self.lines):
                raise YamlError("unterminated quoted scalar")
            pieces.append(self.lines[self.i])
        joined = "\n".join(pieces)
        end = quoted_end(joined)
        if strip_comment(joined[end:]).strip(" \t"):
            raise YamlError("unexpected text after a quoted scalar")
        self.i += 1
        return unquote_line(joined[:end])

    def _flow(self, text: str, n: int) -> Any:
        pieces = [text]
        while (end := flow_end(" ".join(pieces))) == -1:
            self.i += 1
            if self.i >= len(self.lines):
                raise YamlError("unterminated flow collection")
            pieces.append(self.lines[self.i].strip(" \t"))
        joined = " ".join(pieces)
        if strip_comment(joined[end:]).strip(" \t"):
            raise YamlError("unexpected text after a flow collection")
        self.i += 1
        value, _ = FlowReader(joined[:end], self.anchors).value(0)
        return value

    def _block_scalar(self, text: str, n: int) -> str:
        header = strip_comment(text[1:])
        m = re.fullmatch(r"([-+]?)([1-9]?)|([1-9])([-+])", header)
        if not m:
            raise YamlError(f"bad block scalar header {text!r}")
        chomp = m[1] or m[4] or ""
        digit = m[2] or m[3]
        self.i += 1
        content_indent = n + int(digit) if digit else None
        if content_indent is None:
            leading: list[str] = []
            for line in self.lines[self.i :]:
                if line.strip(" ") != "":
                    content_indent = _indent_of(line)
                    break
                leading.append(line)
            if content_indent is None or content_indent <= n:
                # No content line: the blank lines before the next node are all empty lines, whatever their spaces.
                content_indent = max(max((len(line) for line in leading), default=0) + 1, n + 1)
        body: list[str] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.strip(" ") != "" and _indent_of(line) < content_indent:
                break
            body.append(line[content_indent:])
            self.i += 1
        last = max((k for k, line in enumerate(body) if line != ""), default=-1)
        trailing = len(body) - last - 1
        content = body[: last + 1]
        value = "\n".join(content) if text[0] == "|" else fold_block(content)
        if chomp == "-" or last == -1 and chomp != "+":
            return value
        if chomp == "+":
            return value + ("\n" if last >= 0 else "") + "\n" * trailing
        return value + "\n"
