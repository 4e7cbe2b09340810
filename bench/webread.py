"""Our web reader against the reference fetch server's pipeline, on a corpus of real HTML pages.

Why: `read https://…` competes with the reference MCP fetch server (modelcontextprotocol/servers `src/fetch`), whose
`extract_content_from_html` is readabilipy (`simple_json_from_html_string(html, use_readability=True)`) followed by
`markdownify(content, heading_style=ATX)`. Ours must be faster and lose less of what a reader needs: headings, code
and links. Both run in this process on the same pages, interleaved page by page so load on the machine hits both.

Corpus: the Debian package `python3.11-doc` (~530 Sphinx pages under /usr/share/doc/python3.11/html). Run as root,
the bench installs it with apt-get when it is missing; otherwise pass `--corpus DIR` (any folder of .html files).
Each page is given to our reader with the URL it has on the web, https://docs.python.org/3.11/<path> (`--base-url`);
the reference takes no URL, as in the fetch server.

The reference runs the way it does for a user of that server: readabilipy itself decides whether Readability.js
can run (Node >= 10 on PATH, and its `javascript/node_modules`, which it `npm install`s on first use when npm is
there); if not, it prints a warning and falls back to its pure-Python simplifier. The bench prints which one ran.
Every reference call pays what it pays in the server (readabilipy spawns `node -v` and then Node on a temp file).

Main content (what must survive) is judged on the original HTML, parsed by lxml (neither pipeline's parser): the
first element with `role="main"` (Sphinx's `div.body`), else `<main>`, else the largest `<article>`, else `<body>`,
without its scripts and styles. In it:
- (a) headings: the text of every h1–h3 must appear as the text of a markdown heading (any level);
- (b) code: the text of every `<pre>` (tabs expanded, lines right-stripped, blank edge lines dropped) must equal
  the content of a fenced or indented code block;
- (c) links: every `<a href>` with visible text (outside `<pre>`, where markdown cannot hold a link) must appear as
  a markdown link with the same text whose target, resolved against the page URL, is the same URL.
Permalink anchors (text only ¶, §, # or 🔗) are navigation aids, not content: they are left out of expected links
and headings, and ¶ § 🔗 are ignored in heading text on both sides. Markdown is judged by parsing it with
markdown-it-py: CommonMark plus the two extensions the pipelines write, tables (html2text) and definition lists
(`term` / `:   definition`, markdownify's `<dl>`), so an item counts only if a markdown reader would see it as such.
A page passes a check when every expected item of that kind survives (counted with multiplicity); pages with no
such item are left out of that check's share. Also reported, not targets: the share of items that survive; (c')
links judged on their text alone, so that a wrong target can be told from a lost link (the reference parses pages
without their URL, so Readability.js writes relative links as `about:blank/…`, counted too); "nav-free", the share
of pages where no link found only outside the main content (site navigation, sidebars, footers) leaks into the
output; and output size.

Target: ours ahead of the reference on pages/s and on each of the three survival shares. `--check` exits 1 if not.
Run: `.venv/bin/python bench/webread.py [--corpus DIR] [--sample N] [--check]`; the whole corpus takes ~25 minutes,
nearly all of it the reference's (it starts Node twice per page). `--show PATH` writes both outputs for one page.
`make bench` installs readabilipy, markdownify, markdown-it-py and mdit-py-plugins into the venv: bench-only, not
dependencies of the harness. Pages under folders whose name starts with `_` (Sphinx's `_static`, `_sources`) are
skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote, urljoin

from mcp_harness.web.extract import html_to_markdown

DEFAULT_CORPUS = Path("/usr/share/doc/python3.11/html")
DEFAULT_BASE = "https://docs.python.org/3.11/"
BENCH_PACKAGES = ("readabilipy", "markdownify", "markdown-it-py", "mdit-py-plugins", "lxml")
PERMALINK_TEXT = frozenset({"¶", "§", "#", "🔗"})
PERMALINK_CHARS = str.maketrans("", "", "¶§🔗")
CHECKS = ("headings", "code", "links")
LOOSE = "link_texts"  # (c) with the target ignored: shows how much of a loss is a wrong target


def _import(name: str) -> ModuleType:
    """The bench-only packages are imported by name so the harness's type check never requires them."""
    try:
        return importlib.import_module(name)
    except ImportError:
        sys.exit(
            f"bench/webread.py needs {name}: run `make bench`, or `.venv/bin/pip install {' '.join(BENCH_PACKAGES)}`."
        )


def corpus_dir(path: Path | None) -> Path:
    """The folder of pages: `--corpus`, else python3.11-doc's, installed with apt-get when we are root."""
    if path is not None:
        if not path.is_dir():
            sys.exit(f"--corpus {path}: no such folder.")
        return path
    if DEFAULT_CORPUS.is_dir():
        return DEFAULT_CORPUS
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("python3.11-doc is not installed; installing it with apt-get …", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "python3.11-doc"]
        if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
            subprocess.run(install, env=env, stdout=subprocess.DEVNULL)
        if DEFAULT_CORPUS.is_dir():
            return DEFAULT_CORPUS
    sys.exit(
        f"No corpus: {DEFAULT_CORPUS} is missing. Install it with `sudo apt-get install python3.11-doc` "
        "(Debian/Ubuntu), or pass --corpus DIR, a folder of .html pages (e.g. any Sphinx build's html output)."
    )


def load_pages(root: Path, sample: int | None) -> list[tuple[str, str]]:
    """(relative path, HTML) of every .html page under `root`, in path order; `sample` keeps N evenly spaced ones."""
    paths = sorted(
        p for p in root.rglob("*.html") if not any(part.startswith("_") for part in p.parts[len(root.parts) :])
    )
    if sample is not None and sample < len(paths):
        paths = [paths[i * len(paths) // sample] for i in range(sample)]
    return [(p.relative_to(root).as_posix(), p.read_text(encoding="utf-8", errors="replace")) for p in paths]


# -- what must survive, from the original HTML ------------------------------------------------------------------------


def _text(node: Any) -> str:
    return " ".join(node.text_content().split())


def _heading_text(text: str) -> str:
    return " ".join(text.translate(PERMALINK_CHARS).split())


def _code_text(text: str) -> str:
    lines = [line.rstrip() for line in text.expandtabs(8).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _url(page_url: str, href: str) -> str:
    return unquote(urljoin(page_url, href.strip()))


@dataclass
class Items:
    headings: Counter[str] = field(default_factory=Counter)
    code: Counter[str] = field(default_factory=Counter)
    links: Counter[tuple[str, str]] = field(default_factory=Counter)
    link_texts: Counter[str] = field(default_factory=Counter)


def expected(lxml_html: ModuleType, source: str, page_url: str) -> tuple[Items, set[tuple[str, str]]]:
    """The main content's headings, code blocks and links, and the links found only outside it."""
    doc = lxml_html.document_fromstring(source)
    for node in doc.xpath("//script|//style|//template"):
        node.drop_tree()
    main = next(iter(doc.xpath("//*[@role='main']") or doc.xpath("//main")), None)
    if main is None:
        articles = doc.xpath("//article")
        main = max(articles, key=lambda a: len(a.text_content())) if articles else doc.find("body")
    main = doc if main is None else main
    items = Items()
    for heading in main.iter("h1", "h2", "h3"):
        parts = [heading.text or ""]
        for child in heading:
            if not (child.tag == "a" and _text(child) in PERMALINK_TEXT):
                parts.append(child.text_content())
            parts.append(child.tail or "")
        text = _heading_text("".join(parts))
        if text:
            items.headings[text] += 1
    for pre in main.iter("pre"):
        code = _code_text(pre.text_content())
        if code:
            items.code[code] += 1

    def links(root: Any) -> Counter[tuple[str, str]]:
        found: Counter[tuple[str, str]] = Counter()
        for a in root.iter("a"):
            href, text = a.get("href"), _text(a)
            if href is None or href.strip().lower().startswith("javascript:") or not text or text in PERMALINK_TEXT:
                continue
            if any(parent.tag == "pre" for parent in a.iterancestors()):
                continue
            found[(text, _url(page_url, href))] += 1
        return found

    items.links = links(main)
    items.link_texts = Counter()
    for (text, _), n in items.links.items():
        items.link_texts[text] += n
    outside = set(links(doc)) - set(items.links)
    return items, outside


def found(markdown_it: Any, markdown: str, page_url: str) -> Items:
    """Headings, code blocks and links as a CommonMark renderer sees them in `markdown`."""
    items = Items()
    tokens = markdown_it.parse(markdown)
    for i, token in enumerate(tokens):
        if token.type in ("fence", "code_block"):
            code = _code_text(token.content)
            if code:
                items.code[code] += 1
        elif token.type == "inline":
            children = token.children or []
            in_heading = i > 0 and tokens[i - 1].type == "heading_open"
            heading: list[str] = []
            link: list[str] | None = None
            href = ""
            for child in children:
                if child.type == "link_open":
                    link, href = [], str(child.attrGet("href") or "")
                elif child.type == "link_close" and link is not None:
                    link_text = " ".join("".join(link).split())
                    if link_text and link_text not in PERMALINK_TEXT:  # a permalink is not part of a heading's text
                        items.links[(link_text, _url(page_url, href))] += 1
                        items.link_texts[link_text] += 1
                        heading.append(link_text)
                    link = None
                else:
                    text = child.content if child.type in ("text", "code_inline") else ""
                    text = " " if child.type in ("softbreak", "hardbreak") else text
                    (heading if link is None else link).append(text)
            if in_heading:
                text = _heading_text("".join(heading))
                if text:
                    items.headings[text] += 1
    return items


# -- the two pipelines ------------------------------------------------------------------------------------------------


def reference_pipeline() -> tuple[Callable[[str], str], str]:
    """The fetch server's `extract_content_from_html`, verbatim, and a line saying how readabilipy will run."""
    simple_json = _import("readabilipy.simple_json")
    markdownify = _import("markdownify")

    def extract_content_from_html(html: str) -> str:
        ret = simple_json.simple_json_from_html_string(html, use_readability=True)
        if not ret["content"]:
            return "<error>Page failed to be simplified from HTML</error>"
        content = markdownify.markdownify(ret["content"], heading_style=markdownify.ATX)
        return content

    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in ("readabilipy", "markdownify"))
    log = io.StringIO()
    with contextlib.redirect_stdout(log):  # readabilipy runs `npm install` here on first use, printing its output
        node = simple_json.have_node()
    if node:
        node_version = subprocess.run(["node", "-v"], capture_output=True, text=True).stdout.strip()
        how = f"Readability.js under Node {node_version} (readabilipy's javascript/node_modules present)"
    else:
        why = "no Node >= 10 on PATH" if shutil.which("node") is None else "its npm install failed or npm is missing"
        how = f"pure-Python fallback: Readability.js cannot run here ({why}), so readabilipy simplifies in Python"
    return extract_content_from_html, f"{versions}; {how}"


def our_pipeline(base_url: str) -> Callable[[str, str], str]:
    def ours(html: str, path: str) -> str:
        return html_to_markdown(html, base_url + path)[1]

    return ours


# -- the run ----------------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    seconds: float = 0.0
    errors: int = 0
    chars: int = 0
    passed: Counter[str] = field(default_factory=Counter)
    items_kept: Counter[str] = field(default_factory=Counter)
    nav_free: int = 0
    unresolved: int = 0  # links written with an about:blank/… target (a DOM parsed without the page's URL)


def survival(want: Items, got: Items, tally: Tally) -> None:
    for check in (*CHECKS, LOOSE):
        want_c: Counter[Any] = getattr(want, check)
        got_c: Counter[Any] = getattr(got, check)
        kept = sum(min(n, got_c[key]) for key, n in want_c.items())
        tally.items_kept[check] += kept
        if want_c and kept == want_c.total():
            tally.passed[check] += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", type=Path, help=f"folder of .html pages (default {DEFAULT_CORPUS})")
    parser.add_argument("--base-url", default=DEFAULT_BASE, help="URL the corpus folder is published at")
    parser.add_argument("--sample", type=int, help="use N evenly spaced pages instead of all")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--show", metavar="PATH", help="write both outputs for this page to /tmp and stop")
    args = parser.parse_args()
    lxml_html = _import("lxml.html")
    deflist = _import("mdit_py_plugins.deflist").deflist_plugin
    markdown_it = _import("markdown_it").MarkdownIt("commonmark").enable("table").use(deflist)
    reference, how = reference_pipeline()
    ours = our_pipeline(args.base_url)
    root = corpus_dir(args.corpus)
    pages = load_pages(root, args.sample)
    if not pages:
        sys.exit(f"No .html pages under {root}.")
    if args.show:
        source = (root / args.show).read_text(encoding="utf-8", errors="replace")
        for name, text in (("ours", ours(source, args.show)), ("reference", reference(source))):
            Path(f"/tmp/webread-{name}.md").write_text(text, encoding="utf-8")
        print("wrote /tmp/webread-ours.md and /tmp/webread-reference.md")
        return 0

    print(f"corpus: {len(pages)} pages, {sum(len(h) for _, h in pages) / 1e6:.1f} M characters of HTML, from {root}")
    print(f"reference: {how}")
    with contextlib.redirect_stderr(io.StringIO()):  # readabilipy's fallback warns on every call: said above
        for path, source in pages[:2]:  # warm-up: imports, caches, readabilipy's first-use checks
            ours(source, path)
            reference(source)

    tallies = {"ours": Tally(), "reference": Tally()}
    totals: Counter[str] = Counter()
    pages_with: Counter[str] = Counter()
    started = time.perf_counter()
    for n, (path, source) in enumerate(pages, 1):
        url = args.base_url + path
        want, outside = expected(lxml_html, source, url)
        for check in (*CHECKS, LOOSE):
            count = getattr(want, check).total()
            totals[check] += count
            pages_with[check] += bool(count)
        for name in ("ours", "reference") if n % 2 else ("reference", "ours"):  # alternate who goes first
            tally = tallies[name]
            start = time.perf_counter()
            try:
                with contextlib.redirect_stderr(io.StringIO()):
                    markdown = ours(source, path) if name == "ours" else reference(source)
            except Exception:  # noqa: BLE001 - a failed conversion is a result: the page loses everything
                markdown = ""
                tally.errors += 1
            tally.seconds += time.perf_counter() - start
            tally.chars += len(markdown)
            got = found(markdown_it, markdown, url)
            survival(want, got, tally)
            tally.nav_free += not (outside & set(got.links))
            tally.unresolved += sum(n for (_, target), n in got.links.items() if target.startswith("about:"))
        if n % 25 == 0:
            print(f"  … {n}/{len(pages)} pages, {time.perf_counter() - started:.0f} s", file=sys.stderr)

    ours_t, ref_t = tallies["ours"], tallies["reference"]
    rate = {name: len(pages) / t.seconds for name, t in tallies.items()}

    def row(label: str, ours_cell: str, ref_cell: str) -> None:
        print(f"{label:<40}{ours_cell:>14}{ref_cell:>14}")

    def share(part: float, whole: float) -> str:
        return f"{part / whole:.1%}" if whole else "–"

    print()
    row("", "ours", "reference")
    row("pages/s", f"{rate['ours']:.2f}", f"{rate['reference']:.2f}")
    row("ms/page (mean)", f"{1000 / rate['ours']:.1f}", f"{1000 / rate['reference']:.1f}")
    labels = {"headings": "(a) h1–h3 headings", "code": "(b) <pre> code blocks", "links": "(c) links", LOOSE: ""}
    for check in CHECKS:
        row(
            f"{labels[check]}: pages ({pages_with[check]})",
            *(share(t.passed[check], pages_with[check]) for t in (ours_t, ref_t)),
        )
        row(f"    items kept ({totals[check]})", *(share(t.items_kept[check], totals[check]) for t in (ours_t, ref_t)))
    row(
        f"(c') link texts, any target: pages ({pages_with[LOOSE]})",
        *(share(t.passed[LOOSE], pages_with[LOOSE]) for t in (ours_t, ref_t)),
    )
    row(f"    items kept ({totals[LOOSE]})", *(share(t.items_kept[LOOSE], totals[LOOSE]) for t in (ours_t, ref_t)))
    row("links to about:blank/…", str(ours_t.unresolved), str(ref_t.unresolved))
    row("nav-free pages", share(ours_t.nav_free, len(pages)), share(ref_t.nav_free, len(pages)))
    row("markdown chars / page", f"{ours_t.chars / len(pages):,.0f}", f"{ref_t.chars / len(pages):,.0f}")
    row("errors", str(ours_t.errors), str(ref_t.errors))
    print()
    print(f"speed ratio (ours / reference): {rate['ours'] / rate['reference']:.1f}×")
    misses = [] if rate["ours"] > rate["reference"] else ["pages/s"]
    misses += [  # a tie counts as ahead only when both keep everything: nothing is left to beat
        labels[c]
        for c in CHECKS
        if ours_t.passed[c] < ref_t.passed[c] or ref_t.passed[c] == ours_t.passed[c] < pages_with[c]
    ]
    verdict = "met" if not misses else "MISSED: " + ", ".join(misses)
    print(f"target (ahead on pages/s and on each of (a), (b), (c) pages): {verdict}")
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
