"""HTML to markdown for `read`: main-content extraction, then html2text.

One tokenizing pass (`html.parser`) keeps the content and drops the rest — the page's navigation, header and footer,
asides, scripts, styles, forms, hidden elements, boilerplate blocks by class or id, empty links and permalink
anchors (the ¶ after a heading) — while recording where the main content is: the first `<main>` or `role="main"`
element, else the largest `<article>`, else `<body>`. Inside that content a `<header>`, `<aside>` or `<nav>` is the
article's own (its title block, footnotes, table of contents) and is kept. The kept events of the region are then
replayed straight into html2text's handlers, so the page is tokenized once rather than re-serialized and parsed again:
the pure-Python tokenizer is most of the cost of a read. End tags that HTML lets a page leave out (`</p>`, `</li>`,
`</td>`, …) are implied as a browser would, and every look back through the open elements is bounded, so a sloppy
or hostile page costs time linear in its size.

html2text writes headings, lists, links, fenced code and tables. Its output was checked with a CommonMark parser on
real documentation (bench/webread.py), and each place where a renderer (or a model reading markdown) would lose
content is fixed here, without touching what html2text does right:
- a block after the first in a list item (second paragraph, code block, text after a nested list) came out
  unindented: it ended the list, and a code fence after such a paragraph was read as part of it;
- a definition (`<dd>`) started with four spaces: after a blank line, an indented code block;
- a quote inside a list item got its "> " before the item's indentation: it is written as blocks of the item;
- markup inside `<pre>` (links, bold) was written into the code block as markdown syntax: only its text is kept;
- `_`, `*` and `<` in text were not escaped: `__init__` rendered as a bold "init", `<script>` began an HTML block
  that hid the rest of the page; inline code holding a backtick broke out of its single backticks;
- emphasis spacing: the first text of an emphasis lost its trailing space, a space was forced before punctuation
  after it and inside it, and two emphases side by side (`_a__b_`) rendered as neither;
- in-page links (footnotes, "see below") were dropped; blank-line collapsing reached inside code blocks.
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from typing import Literal

import html2text

_DROP_TAGS = frozenset(
    {
        "script",
        "style",
        "noscript",
        "template",
        "nav",
        "header",
        "footer",
        "aside",
        "form",
        "button",
        "select",
        "textarea",
        "iframe",
        "svg",
        "canvas",
        "dialog",
        "menu",
        "object",
    }
)
# Inside an article or the main content these are the article's own: its title block, its footnotes and callouts,
# its table of contents. Outside it they are the site's.
_KEPT_IN_CONTENT = frozenset({"header", "aside", "nav"})
_DROP_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search", "dialog", "menu"})
_BOILERPLATE = frozenset(
    {
        "nav",
        "navbar",
        "navigation",
        "menu",
        "sidebar",
        "footer",
        "header",
        "breadcrumb",
        "breadcrumbs",
        "banner",
        "ad",
        "ads",
        "advert",
        "advertisement",
        "share",
        "social",
        "newsletter",
        "promo",
        "related",
        "popup",
        "modal",
        "skip-link",
        "cookie",
        "cookies",
        "cookie-banner",
        "cookie-consent",
    }
)
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
)
_KEPT_VOID = frozenset({"br", "hr"})  # the rest render as nothing (images are not shown)
_KEPT_ATTRS = frozenset({"href", "start"})  # link targets and list numbering; titles and classes only add noise
_PERMALINK_TEXT = frozenset({"¶", "§", "#", "🔗"})
_FENCE = re.compile(r"[ >]*```")
_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # one that is not between two letters or digits
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # text like "<script>" would be read as HTML (and end the markdown)

# Start tags that end an open element without its end tag, as in HTML's parsing rules (reduced to what keeps a sloppy
# page's structure, and the stack of open elements, from growing without bound): a block ends an open `<p>`; an
# item ends the previous item of its list, a cell the previous cell, a link an open link. (closes, searched down to)
_CLOSES_P = frozenset(
    "address article aside blockquote details div dl fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header "
    "hgroup hr main menu nav ol p pre section table ul".split()
)
_IMPLIED_END: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol", "menu"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "tr": (frozenset({"tr"}), frozenset({"table", "thead", "tbody", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "option": (frozenset({"option"}), frozenset({"select", "datalist"})),
    "a": (frozenset({"a"}), frozenset()),
}
_IMPLIED_SEARCH = 32  # open elements looked through for one of them
_END_SEARCH = 256  # open elements looked through for the one an end tag closes (beyond: left open, as if stray)
_CODE_SEARCH = 4096  # events of inline code looked through for a backtick (beyond: not code a reader can use)

_START, _END, _DATA = 0, 1, 2
_TICKS = "data-ticks"  # on inline code that holds a backtick: the run of backticks to write around it
_CODE_TAGS = frozenset({"code", "kbd", "tt"})
_EMPHASIS = frozenset({"em", "i", "u", "strong", "b", "del", "strike", "s"})
Attrs = list[tuple[str, str | None]]
Event = tuple[Literal[0], str, Attrs] | tuple[Literal[1], str] | tuple[Literal[2], str]


class _Element:
    """An open element: whether it is kept, where its events begin, and the region it starts, if any."""

    __slots__ = ("tag", "state", "region", "start", "chars", "href")

    def __init__(self, tag: str, state: int, region: str | None, start: int, chars: int, href: str | None) -> None:
        self.tag = tag
        self.state = state  # 0 kept, 1 dropped (and everything in it), 2 inside a dropped element, 3 unwrapped
        self.region = region
        self.start = start
        self.chars = chars  # kept characters before it (texts with a backtick, for inline code)
        self.href = href


class MainContent(HTMLParser):
    """Records the events of the elements it keeps and the spans of `main`, `article` and `body` regions."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[Event] = []
        self.title = ""
        self.regions: dict[str, list[tuple[int, int, int]]] = {"main": [], "article": [], "body": []}
        self._open: list[_Element] = []
        self._open_tags: Counter[str] = Counter()  # so that a stray end tag costs no search
        self._skipping = 0  # dropped elements open
        self._in_content = 0  # main/article regions open
        self._in_pre = 0
        self._in_title = False
        self._chars = 0  # characters of kept text so far, to size articles
        self._backticks = 0  # texts holding a backtick so far, so that only code that has one is searched for it

    def _dropped(self, tag: str, attrs: Attrs) -> bool:
        if tag in _DROP_TAGS:
            return not (self._in_content and tag in _KEPT_IN_CONTENT)
        for key, value in attrs:
            if key == "class" or key == "id":
                if value and any(token in _BOILERPLATE for token in value.lower().split()):
                    return True
            elif key == "role":
                role = (value or "").lower()
                if role in _DROP_ROLES and not (self._in_content and role == "navigation"):
                    return True
            elif key == "hidden" or (key == "aria-hidden" and value == "true"):
                return True
        return False

    def handle_starttag(self, tag: str, attrs: Attrs) -> None:
        opened = self._open
        if opened:
            if tag in _CLOSES_P and opened[-1].tag == "p":
                self._close_to(len(opened) - 1)
            implied = _IMPLIED_END.get(tag)
            if implied is not None:
                closes, scope = implied
                for i in range(len(opened) - 1, max(-1, len(opened) - 1 - _IMPLIED_SEARCH), -1):
                    if opened[i].tag in closes:
                        self._close_to(i)
                        break
                    if opened[i].tag in scope:
                        break
        if tag in _VOID:
            if self._skipping or tag not in _KEPT_VOID:
                return
            if self._in_pre:
                self.handle_data("\n" if tag == "br" else "")
            else:
                self.events.append((_START, tag, []))
            return
        if self._skipping:
            self._push(_Element(tag, 2, None, 0, 0, None))
            return
        if tag == "title":
            self._in_title = True
        if self._dropped(tag, attrs):
            self._push(_Element(tag, 1, None, 0, 0, None))
            self._skipping += 1
            return
        if self._in_pre:  # a code block holds text only: no links, emphasis or nested code marks in it
            self._push(_Element(tag, 3, None, 0, 0, None))
            return
        region = tag if tag in ("main", "article", "body") else None
        href = None
        kept: Attrs = []
        for key, value in attrs:
            if key in _KEPT_ATTRS:
                kept.append((key, value))
                if key == "href":
                    href = value
            elif key == "role" and value == "main":
                region = "main"
        if region == "main" or region == "article":
            self._in_content += 1
        elif tag == "pre":
            self._in_pre += 1
        counted = self._backticks if tag in _CODE_TAGS else self._chars
        self._push(_Element(tag, 0, region, len(self.events), counted, href))
        self.events.append((_START, tag, kept))

    def handle_startendtag(self, tag: str, attrs: Attrs) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self._open_tags[tag]:
            return  # a stray end tag: nothing to close
        opened = self._open
        for i in range(len(opened) - 1, max(-1, len(opened) - 1 - _END_SEARCH), -1):
            if opened[i].tag == tag:
                self._close_to(i)
                return

    def _push(self, element: _Element) -> None:
        self._open.append(element)
        self._open_tags[element.tag] += 1

    def _close_to(self, i: int) -> None:
        """Close the open elements from the innermost one out to the i-th."""
        opened = self._open
        while len(opened) > i:
            element = opened.pop()
            self._open_tags[element.tag] -= 1
            self._close(element)

    def _close(self, element: _Element) -> None:
        if element.state:
            self._skipping -= element.state == 1
            return
        events = self.events
        if element.tag == "title":
            self._in_title = False
        elif element.tag == "pre":
            self._in_pre -= 1
        elif element.tag == "a" and self._is_noise_link(element):
            del events[element.start :]
            return
        elif (
            element.tag in _CODE_TAGS
            and not self._in_pre
            and self._backticks > element.chars
            and len(events) - element.start < _CODE_SEARCH
        ):
            text = "".join(e[1] for e in events[element.start + 1 :] if e[0] == _DATA)
            if "`" in text:
                longest = max(len(run) for run in re.findall("`+", text))
                events[element.start] = (_START, element.tag, [(_TICKS, "`" * (longest + 1))])
        events.append((_END, element.tag))
        if element.region is not None:
            self.regions[element.region].append((element.start, len(events), self._chars - element.chars))
            if element.region != "body":
                self._in_content -= 1

    def _is_noise_link(self, element: _Element) -> bool:
        """A link with no text (renders as `[](…)`), or a permalink: a ¶ or # pointing at its own heading."""
        text = ""
        events = self.events
        for i in range(element.start + 1, len(events)):
            event = events[i]
            if event[0] == _DATA:
                text += event[1].strip()
                if len(text) > 2:  # longer than any permalink mark: a real link (and no need to read on)
                    return False
        return not text or (text in _PERMALINK_TEXT and (element.href or "").startswith("#"))

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._in_title:
            self.title += data
            return
        self.events.append((_DATA, data))
        self._chars += len(data)
        if "`" in data:
            self._backticks += 1

    def main_events(self) -> list[Event]:
        """The events of the main content: `<main>`/`role=main`, else the largest `<article>`, else `<body>`."""
        self._close_to(0)  # elements never closed run to the end of the document
        if self.regions["main"]:
            start, end, _ = self.regions["main"][0]
        elif self.regions["article"]:
            start, end, _ = max(self.regions["article"], key=lambda r: r[2])
        elif self.regions["body"]:
            start, end, _ = self.regions["body"][0]
        else:
            start, end = 0, len(self.events)
        return self.events[start:end]


class _Markdown(html2text.HTML2Text):
    """html2text with the fixes listed in the module docstring; each keeps what a renderer would otherwise lose."""

    def __init__(self, baseurl: str) -> None:
        super().__init__(baseurl=baseurl, bodywidth=0)
        self.ignore_images = True
        self.backquote_code_style = True
        self.mark_code = False
        self.pad_tables = False
        self.unicode_snob = True
        self.skip_internal_links = False  # in-page links (footnotes, "see below") are content too
        self._marker = False
        self._items: list[str] = []  # the content indentation of each open list item
        self._flat_quotes: list[bool] = []
        self._ticks: list[str] = []
        self._stressed = 0  # emphasis elements open

    def handle_tag(self, tag: str, attrs: dict[str, str | None], start: bool) -> None:
        if tag in _EMPHASIS:
            self._stressed = max(0, self._stressed + (1 if start else -1))
            if start and not self.p_p and self.outtextlist and self.outtextlist[-1][-1:] in ("_", "*", "~"):
                self.o(" ")  # `_a__b_` (two emphases side by side) renders as neither: `_a_ _b_` does
        if tag == "li":
            self._list_item(attrs, start)
        elif tag == "blockquote":
            # A quote inside a list item would need its "> " after the item's indentation; html2text puts it
            # before, which breaks both. Such a quote's blocks are written as plain blocks of the item instead.
            flat = bool(self.list) if start else bool(self._flat_quotes) and self._flat_quotes.pop()
            if start:
                self._flat_quotes.append(flat)
            if not flat:
                super().handle_tag(tag, attrs, start)
            else:
                self.current_tag = tag
                self.p()
        elif tag == "dd":  # html2text starts one with four spaces: after a blank line, an indented code block
            self.current_tag = tag
            self.p() if start else self.pbr()
        elif tag in ("code", "kbd", "tt") and not self.pre and (attrs.get(_TICKS) or not start and self._ticks[-1:]):
            # Code holding a backtick needs a longer run of them around it (marked by MainContent).
            self.current_tag = tag
            ticks = attrs.get(_TICKS) or "``" if start else self._ticks.pop()
            if start:
                self._ticks.append(ticks)
            self.o(ticks + " " if start else " " + ticks)
            self.code = start
        else:
            super().handle_tag(tag, attrs, start)

    def _list_item(self, attrs: dict[str, str | None], start: bool) -> None:
        if not start:
            # html2text forgets the indentation at any item's end, so text after a nested list fell out of its item
            super().handle_tag("li", attrs, start)
            if self._items:
                self._items.pop()
            self.list_code_indent = self._items[-1] if self._items else ""
            return
        self._marker = True  # the item's own marker line is indented by html2text itself
        super().handle_tag("li", attrs, start)
        self._marker = False
        item = self.list[-1] if self.list else None
        if item is not None and item.name == "ol":  # align continuation blocks with "10. " as well as "1. "
            self.list_code_indent = self.list_code_indent[:-3] + " " * (len(str(item.num)) + 2)
        self._items.append(self.list_code_indent)

    def handle_data(self, data: str, entity_char: bool = False) -> None:
        if self.stressed and data[-1:].isspace() and data.strip():
            # html2text strips both ends of an emphasis's first text: keep the space before what follows
            super().handle_data(data.rstrip(), entity_char)
            super().handle_data(" ", entity_char)
            return
        if self.preceding_stressed and (self._stressed or not data[:1].isalnum()):
            # html2text's space after emphasis, so that `_a_b` is not read as text: not needed before punctuation,
            # and wrong inside the emphasis (`**kw` split in two texts became `** kw`)
            self.preceding_stressed = False
        super().handle_data(data, entity_char)

    def o(self, data: str, puredata: bool = False, force: bool | str = False) -> None:
        if puredata and not (self.pre or self.code):
            # Text, escaped by html2text but for `*`, `_` and `<`: `__init__` would render as bold "init", and
            # `<script>` as an HTML block that hides the rest of the page.
            if "*" in data or "_" in data:
                data = _UNDERSCORE.sub(r"\_", data.replace("*", r"\*"))
            if "<" in data:
                data = _TAG_START.sub(r"\<", data)
        if self.p_p and not self.start and not self.quiet and not self._marker:
            if puredata and not self.pre:
                data = data.lstrip()  # html2text drops the space that follows a break
            if data or force:
                # Write the pending break ourselves, ending in the list item's indentation, so the next block
                # stays in the item; before a code fence one newline fewer, as html2text writes the fence's own.
                quote = ">" * self.blockquote + (" " if self.blockquote else "")
                breaks = self.p_p - 1 if self.startpre else self.p_p
                self.out((self.br_toggle + "\n" + quote) * breaks)
                if self.list and not self.startpre:
                    self.out(self.list_code_indent)
                self.p_p = 0
                self.br_toggle = ""
                self.space = False
        if self.startpre:
            self.space = False  # no stray space after the opening fence
        super().o(data, puredata, force)


def _tidy(markdown: str) -> str:
    """At most one blank line between blocks, none at the ends; code blocks keep their blank lines."""
    out: list[str] = []
    fenced = blank = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line.rstrip())
            blank = False
        elif fenced:
            out.append(line)
        elif line.strip():
            out.append(line)
            blank = False
        elif not blank and out:
            out.append("")
            blank = True
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def html_to_markdown(source: str, base_url: str) -> tuple[str, str]:
    """(title, markdown) of the page's main content; links are resolved against `base_url`."""
    parser = MainContent()
    parser.feed(source)
    parser.close()
    converter = _Markdown(base_url)
    start, end, data = converter.handle_starttag, converter.handle_endtag, converter.handle_data
    for event in parser.main_events():
        if event[0] == _DATA:
            data(event[1])
        elif event[0] == _START:
            start(event[1], event[2])
        else:
            end(event[1])
    markdown = converter.finish()
    return " ".join(parser.title.split()), _tidy(markdown)
