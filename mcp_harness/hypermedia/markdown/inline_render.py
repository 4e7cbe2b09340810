"""Text plus annotations → inline markdown, ported from the Seed client's `renderInline` (blocks-to-markdown).

Annotations may overlap arbitrarily, while markdown markers must nest. The client solves that by cutting the text
at every span boundary and closing and reopening markers around each cut, with `Code` and `Embed` kept innermost
(nothing can be nested inside them); the parser's `merge_annotations` glues the pieces back together. Everything
that would read as syntax is backslash-escaped. We port it statement by statement so the markdown we hand to a
model is the markdown the Seed client would have written for the same block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_harness.hypermedia.blocks import Annotation
from mcp_harness.hypermedia.markdown.jsutil import WS, comment_json, is_ws, locale_compare_key, to_js_string

SPAN_STYLE = {
    "TextColor": "color",
    "BackgroundColor": "background-color",
    "TextSize": "font-size",
    "TextFamily": "font-family",
}
_ESCAPED = re.compile(r"[\\`*_~\[\]<]")
_LINE_START = re.compile(r"#|[-+>|$]|[0-9]+[.)]")
_NEEDS_ANGLE = re.compile(f"{WS}|[()<>]")
_CODE_PAD = re.compile(r"^[` ]|[` ]\Z")


@dataclass(eq=False, slots=True)
class _Span:
    """One contiguous range of one annotation; identity matters (the JS compares these objects by reference)."""

    start: int
    end: int
    type: str
    link: str | None
    attributes: Mapping[str, Any] | None
    key: str


@dataclass(eq=False, slots=True)
class _Opened:
    span: _Span
    close: str


def escape_inline(s: str, at_line_start: bool) -> str:
    out = _ESCAPED.sub(lambda m: "\\" + m[0], s).replace("\n", "<br>")
    if at_line_start:
        # What would start a heading, list item, quote, table or math block at the start of a line.
        m = _LINE_START.match(out)
        if m:
            marker = m[0]
            escaped = "\\" + marker if len(marker) == 1 else marker[:-1] + "\\" + marker[-1]
            out = escaped + out[m.end() :]
        if out and is_ws(out[0]):
            out = "\\" + out
    return out


def _escape_trailing_whitespace(s: str) -> str:
    # Trailing whitespace would be trimmed by the parser, and the id comment follows after a space.
    return s[:-1] + "\\" + s[-1] if s and is_ws(s[-1]) else s


def render_url(url: str) -> str:
    return f"<{url}>" if _NEEDS_ANGLE.search(url) else url


def _spans(text: str, annotations: Sequence[Annotation]) -> list[_Span]:
    spans: list[_Span] = []
    for a in annotations:
        link = a.link or None
        attributes = a.attributes if a.attributes else None
        key = f"{a.type} {link or ''} {comment_json(attributes) if attributes else ''}"
        for i, start in enumerate(a.starts):
            start = max(0, start)
            end = min(len(text), a.ends[i] if i < len(a.ends) else -1)
            if end > start:
                spans.append(_Span(start, end, a.type, link, attributes, key))
    spans.sort(key=lambda s: (locale_compare_key(s.key), s.start, s.end))
    merged: list[_Span] = []
    for s in spans:
        last = merged[-1] if merged else None
        if last and last.key == s.key and s.start <= last.end:
            last.end = max(last.end, s.end)
        else:
            merged.append(_Span(s.start, s.end, s.type, s.link, s.attributes, s.key))
    return merged


def _priority(s: _Span) -> int:
    return 2 if s.type == "Embed" else 1 if s.type == "Code" else 0


def _opening_order(s: _Span) -> tuple[int, int, int, Any]:
    return _priority(s), -s.end, s.start, locale_compare_key(s.type)


def _has(items: Sequence[_Span], span: _Span) -> bool:
    return any(item is span for item in items)


def _markers(s: _Span, chunk: str, full_text: str) -> tuple[str, str]:
    match s.type:
        case "Bold":
            return "**", "**"
        case "Italic":
            return "_", "_"
        case "Strike":
            return "~~", "~~"
        case "Underline":
            return "<u>", "</u>"
        case "Range":
            return "<mark>", "</mark>"
        case "Link":
            return "[", f"]({render_url(s.link or '')})"
        case "Embed":
            # The U+FFFC placeholder is not written; the `<hm://…>` autolink is the whole mention.
            return f"<{s.link or ''}>", ""
        case "Code":
            fence_len = 1
            for m in re.finditer("`+", full_text[s.start : s.end]):
                fence_len = max(fence_len, len(m[0]) + 1)
            fence = "`" * fence_len
            pad = " " if _CODE_PAD.search(chunk) else ""
            return fence + pad, pad + fence
        case _:
            prop = SPAN_STYLE.get(s.type)
            if prop:
                raw = (s.attributes or {}).get("value")
                value = "" if raw is None else to_js_string(raw)
                return f'<span style="{prop}:{_encode_html_attr(value)}">', "</span>"
            return "", ""


def _encode_html_attr(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def render_inline(text: str, annotations: Sequence[Annotation], *, at_line_start: bool) -> str:
    """Inline markdown for a block's text and annotations (`renderInline`)."""
    spans = _spans(text, annotations)
    if not spans:
        return _escape_trailing_whitespace(escape_inline(text, at_line_start))
    points = sorted({0, len(text), *(s.start for s in spans), *(s.end for s in spans)})
    stack: list[_Opened] = []
    out = ""
    for p in range(len(points) - 1):
        pos, nxt = points[p], points[p + 1]
        active = [s for s in spans if s.start <= pos and s.end >= nxt]
        survivors: list[_Span] = []
        first_inactive = next((k for k, o in enumerate(stack) if not _has(active, o.span)), len(stack))
        while len(stack) > first_inactive:
            top = stack.pop()
            out += top.close
            if _has(active, top.span):
                survivors.insert(0, top.span)
        opening = [
            *survivors,
            *(s for s in active if not any(o.span is s for o in stack) and not _has(survivors, s)),
        ]
        opening.sort(key=_opening_order)
        inner = [o for o in stack if _priority(o.span) > 0]
        if opening and inner:
            # Code and Embed must stay innermost: close them so the new markers open outside, then reopen.
            for o in reversed(inner):
                out += o.close
                stack.remove(o)
                opening.append(o.span)
            opening.sort(key=_opening_order)
        chunk = text[pos:nxt]
        for s in opening:
            opener, closer = _markers(s, chunk, text)
            out += opener
            stack.append(_Opened(s, closer))
        top_type = stack[-1].span.type if stack else None
        if top_type == "Embed":
            pass
        elif top_type == "Code":
            out += chunk.replace("\n", "<br>")
        else:
            out += escape_inline(chunk, at_line_start and out == "")
    while stack:
        out += stack.pop().close
    return _escape_trailing_whitespace(out)
