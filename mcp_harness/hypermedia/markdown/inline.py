"""Inline markdown → text plus annotations, ported from the Seed client's `parseInlineFormatting`.

A Seed block stores plain text and a list of annotation spans over it, not markdown. The client's parser is a
single left-to-right scan with a stack of open markers, so hand-written, mis-nested input degrades instead of
failing, and everything the client's own renderer emits (`markdown_inline_render`) parses back exactly. We port it
statement by statement (`dist/chunk-*.mjs` of `@seed-hypermedia/client`) so documents written through us read the
same in every Seed app. The one intended difference: offsets count code points, where the JS counts UTF-16 units
(HYPERMEDIA §3; the editor and the Go daemon use code points, so the JS is wrong for astral characters).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mcp_harness.hypermedia.blocks import Annotation
from mcp_harness.hypermedia.markdown.jsutil import NWS, WS, json_stringify, sort_keys_deep, trim

SPAN_STYLE_TO_TYPE = {
    "color": "TextColor",
    "background-color": "BackgroundColor",
    "font-size": "TextSize",
    "font-family": "TextFamily",
}
SPAN_TYPES = frozenset(SPAN_STYLE_TO_TYPE.values())

_BR = re.compile(f"<br{WS}*/?>")
_HTML_TAG = re.compile(r"<(/?)(u|mark)>")
_SPAN = re.compile(r'<span style="([a-z-]+):([^"]*)">')
_AUTOLINK = re.compile(f"[a-zA-Z][a-zA-Z0-9+.-]*:{NWS}*\\Z")
_WS_OR_ANGLE = re.compile(f"{WS}|[<>]")


@dataclass(slots=True)
class _Open:
    """A marker waiting for its closer: where its span starts in the output text."""

    type: str
    start: int
    family: str
    attributes: Mapping[str, Any] | None = None


@dataclass(slots=True)
class _Parsed:
    text: str = ""
    annotations: list[Annotation] = field(default_factory=list[Annotation])


@dataclass(frozen=True, slots=True)
class Link:
    """A `[label](url)` found by `read_link`: the raw label, the url, and the index just past the `)`."""

    label: str
    url: str
    end: int


def _decode_html_attr(s: str) -> str:
    return s.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def parse_inline(raw: str) -> tuple[str, tuple[Annotation, ...]]:
    """Plain text and merged annotations for one line of inline markdown (`parseInlineFormatting`)."""
    out = _Parsed()
    stack: list[_Open] = []

    def close(span: _Open) -> None:
        # An empty span (`****`) leaves no annotation, as in the JS.
        if len(out.text) > span.start:
            out.annotations.append(
                Annotation(span.type, (span.start,), (len(out.text),), attributes=dict(span.attributes or {}))
            )

    def close_at(idx: int) -> None:
        # Closing a marker that is not innermost closes and reopens everything above it, so spans stay nested.
        above = stack[idx + 1 :]
        del stack[idx + 1 :]
        for span in reversed(above):
            close(span)
        close(stack.pop())
        for span in above:
            stack.append(replace(span, start=len(out.text)))

    def toggle(kind: str, family: str) -> None:
        idx = _find_last(stack, lambda s: s.type == kind and s.family == family)
        if idx == -1:
            stack.append(_Open(kind, len(out.text), family))
        else:
            close_at(idx)

    def close_type(pred: Callable[[_Open], bool]) -> None:
        idx = _find_last(stack, pred)
        if idx != -1:
            close_at(idx)

    def append_parsed(text: str, annotations: tuple[Annotation, ...]) -> None:
        offset = len(out.text)
        out.text += text
        for ann in annotations:
            out.annotations.append(
                replace(ann, starts=tuple(s + offset for s in ann.starts), ends=tuple(e + offset for e in ann.ends))
            )

    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        if ch == "\\" and i + 1 < n:
            out.text += raw[i + 1]
            i += 2
            continue
        if ch == "`":
            run = _run_length(raw, i, "`")
            closer = find_backtick_run(raw, i + run, run)
            if closer != -1:
                inner = raw[i + run : closer]
                if len(inner) >= 2 and inner.startswith(" ") and inner.endswith(" ") and trim(inner) != "":
                    inner = inner[1:-1]
                inner = _BR.sub("\n", inner)
                start = len(out.text)
                out.text += inner
                if inner:
                    out.annotations.append(Annotation("Code", (start,), (len(out.text),)))
                i = closer + run
                continue
            out.text += raw[i : i + run]
            i += run
            continue
        if ch in "*_":
            run = _run_length(raw, i, ch)
            i += run
            while run > 0:
                if run >= 2:
                    toggle("Bold", ch)
                    run -= 2
                else:
                    toggle("Italic", ch)
                    run -= 1
            continue
        if ch == "~" and raw[i + 1 : i + 2] == "~":
            toggle("Strike", "~")
            i += 2
            continue
        if ch == "<":
            if m := _BR.match(raw, i):
                out.text += "\n"
                i = m.end()
                continue
            if m := _HTML_TAG.match(raw, i):
                kind = "Underline" if m[2] == "u" else "Range"
                if m[1]:
                    close_type(lambda s, kind=kind: s.type == kind)
                else:
                    stack.append(_Open(kind, len(out.text), "html"))
                i = m.end()
                continue
            m = _SPAN.match(raw, i)
            if m and m[1] in SPAN_STYLE_TO_TYPE:
                value = {"value": _decode_html_attr(m[2])}
                stack.append(_Open(SPAN_STYLE_TO_TYPE[m[1]], len(out.text), "html", value))
                i = m.end()
                continue
            if raw.startswith("</span>", i):
                close_type(lambda s: s.type in SPAN_TYPES)
                i += 7
                continue
            end = raw.find(">", i + 1)
            if end != -1:
                inner = raw[i + 1 : end]
                if _AUTOLINK.match(inner) and not _WS_OR_ANGLE.search(inner):
                    start = len(out.text)
                    if inner.startswith("hm://"):
                        # An inline mention: the object replacement character stands in for the embedded title.
                        out.text += "\ufffc"
                        out.annotations.append(Annotation("Embed", (start,), (len(out.text),), link=inner))
                    else:
                        out.text += inner
                        out.annotations.append(Annotation("Link", (start,), (len(out.text),), link=inner))
                    i = end + 1
                    continue
        if ch == "!" and raw[i + 1 : i + 2] == "[":
            link = read_link(raw, i + 1)
            if link:
                append_parsed(*parse_inline(link.label))
                i = link.end
                continue
        if ch == "[":
            link = read_link(raw, i)
            if link:
                start = len(out.text)
                append_parsed(*parse_inline(link.label))
                if len(out.text) > start:
                    out.annotations.append(Annotation("Link", (start,), (len(out.text),), link=link.url))
                i = link.end
                continue
        out.text += ch
        i += 1
    while stack:
        close(stack.pop())
    return out.text, merge_annotations(out.annotations)


def _run_length(s: str, i: int, ch: str) -> int:
    n = 0
    while i + n < len(s) and s[i + n] == ch:
        n += 1
    return n


def _find_last(stack: list[_Open], pred: Callable[[_Open], bool]) -> int:
    for i in range(len(stack) - 1, -1, -1):
        if pred(stack[i]):
            return i
    return -1


def find_backtick_run(s: str, start: int, n: int) -> int:
    """Index of the next run of exactly `n` backticks at or after `start`, or -1."""
    i = start
    while i < len(s):
        if s[i] == "`":
            k = _run_length(s, i, "`")
            if k == n:
                return i
            i += k
        else:
            i += 1
    return -1


def read_link(s: str, open_at: int) -> Link | None:
    """The `[label](url)` starting at `open_at` (the `[`), bracket- and paren-balanced, or None (`readLink`)."""
    depth = 0
    i = open_at
    close_at = -1
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            run = _run_length(s, i, "`")
            closer = find_backtick_run(s, i + run, run)
            i = i + run if closer == -1 else closer + run
            continue
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                close_at = i
                break
        i += 1
    if close_at == -1 or s[close_at + 1 : close_at + 2] != "(":
        return None
    label = s[open_at + 1 : close_at]
    j = close_at + 2
    if s[j : j + 1] == "<":
        gt = s.find(">", j + 1)
        if gt == -1 or s[gt + 1 : gt + 2] != ")":
            return None
        return Link(label, s[j + 1 : gt], gt + 2)
    parens = 0
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "(":
            parens += 1
        elif c == ")":
            if parens == 0:
                return Link(label, s[close_at + 2 : j], j + 1)
            parens -= 1
        j += 1
    return None


def _annotation_key(a: Annotation) -> str:
    attributes = json_stringify(sort_keys_deep(a.attributes)) if a.attributes else ""
    return f"{a.type}\0{a.link or ''}\0{attributes}"


def merge_annotations(annotations: list[Annotation] | tuple[Annotation, ...]) -> tuple[Annotation, ...]:
    """Same-kind spans that touch or overlap become one, in a deterministic order (`mergeAdjacentAnnotations`).

    The renderer splits spans at every boundary to keep markers nested; merging is what makes parse(render(doc))
    equal doc.
    """
    groups: dict[str, tuple[Annotation, list[list[int]]]] = {}
    for a in annotations:
        key = _annotation_key(a)
        _, ranges = groups.setdefault(key, (a, []))
        for idx, s in enumerate(a.starts):
            e = a.ends[idx] if idx < len(a.ends) else None
            if e is None or e <= s:
                continue
            ranges.append([s, e])
    merged_out: list[Annotation] = []
    for proto, ranges in groups.values():
        ranges.sort()
        merged: list[list[int]] = []
        for r in ranges:
            if merged and r[0] <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], r[1])
            else:
                merged.append(list(r))
        for s, e in merged:
            merged_out.append(Annotation(proto.type, (s,), (e,), link=proto.link, attributes=proto.attributes))
    merged_out.sort(key=lambda a: (a.starts[0], -a.ends[0], a.type))
    return tuple(merged_out)
