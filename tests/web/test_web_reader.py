"""Main-content extraction and markdown conversion (`mcp_harness.web.extract`) on fixture HTML: what a reader of the
markdown must still see — headings, code blocks, links — and the html2text flaws that would hide it."""

from __future__ import annotations

from mcp_harness.web.extract import html_to_markdown

BASE = "https://docs.example/guide/page.html"

SPHINX = """<!doctype html><html><head><title>Guide &#8212; Docs</title><style>p{}</style></head><body>
<div class="related" role="navigation"><a href="../index.html">Docs home</a></div>
<div class="document"><div class="body" role="main">
<section id="guide"><h1>The guide<a class="headerlink" href="#guide" title="Permalink to this heading">¶</a></h1>
<nav class="contents local" id="contents"><ul><li><a href="#usage">Usage</a></li></ul></nav>
<p>See <a href="#usage">usage</a>, the <a href="other.html#x">other page</a> and a footnote <a href="#f1">[1]</a>.</p>
<section id="usage"><h2>Usage<a class="headerlink" href="#usage">¶</a></h2>
<div class="highlight"><pre><span></span><span class="n">x</span> = <a href="x.html">spam</a> <strong>eggs</strong>


y = 2
</pre></div>
<aside class="footnote" id="f1" role="note"><p>The footnote.</p></aside>
</section></section></div></div>
<div class="sphinxsidebar" role="navigation"><h3>Navigation</h3><a href="next.html">Next topic</a></div>
<div class="footer">&copy; Copyright</div></body></html>"""


def md(source: str) -> str:
    return html_to_markdown(source, BASE)[1]


def test_role_main_is_the_content_and_the_site_around_it_is_dropped() -> None:
    title, text = html_to_markdown(SPHINX, BASE)
    assert title == "Guide — Docs"
    assert text.startswith("# The guide\n")
    for site in ("Docs home", "Navigation", "Next topic", "Copyright", "p{}"):
        assert site not in text
    # in the content, a table of contents and a footnote belong to the page
    assert "* [Usage](https://docs.example/guide/page.html#usage)" in text
    assert "The footnote." in text


def test_permalinks_go_and_in_page_links_stay() -> None:
    text = md(SPHINX)
    assert "¶" not in text and "## Usage\n" in text
    assert "[usage](https://docs.example/guide/page.html#usage)" in text
    assert "[other page](https://docs.example/guide/other.html#x)" in text
    assert "[[1]](https://docs.example/guide/page.html#f1)" in text


def test_a_code_block_keeps_its_text_and_blank_lines_and_nothing_else() -> None:
    assert "```\nx = spam eggs\n\n\ny = 2\n\n```" in md(SPHINX)


def test_article_page_keeps_its_own_header_and_drops_the_site_chrome() -> None:
    page = """<body><header><a href="/">Site</a></header><nav><a href="/a">Menu</a></nav>
    <article><header><h1>Post title</h1><p>By someone</p></header><p>Short.</p><footer>Share this</footer></article>
    <article><header><h1>The long one</h1></header><p>{}</p><aside><p>A pull quote.</p></aside></article>
    <aside>Site aside</aside><footer>Site footer</footer></body>""".replace("{}", "word " * 200)
    text = md(page)
    assert text.startswith("# The long one") and "A pull quote." in text
    for other in ("Site", "Menu", "Post title", "Site aside", "Site footer"):
        assert other not in text


def test_blocks_after_the_first_in_a_list_item_stay_in_the_item() -> None:
    page = """<ol><li><p>First.</p><p>Second:</p><pre>code()</pre><p>Third.</p></li>
    <li>two<ul><li>nested</li></ul><p>after the nested list</p><blockquote><p>quoted</p></blockquote></li></ol>"""
    assert md(page) == (
        "  1. First.\n\n     Second:\n\n     ```\n     code()\n     ```\n\n     Third.\n\n"
        "  2. two\n     * nested\n\n     after the nested list\n\n     quoted"
    )


def test_items_from_ten_on_indent_to_their_wider_marker() -> None:
    page = "<ol>" + "<li>x</li>" * 9 + "<li><p>ten</p><p>more of ten</p></li></ol>"
    assert md(page).endswith("  10. ten\n\n      more of ten")


def test_a_definition_is_not_indented_into_a_code_block() -> None:
    page = "<dl><dt>f(x)<br/></dt><dd><em>Part of the <a href='abi.html'>ABI</a>.</em><p>Does things.</p></dd></dl>"
    assert md(page) == "f(x)  \n\n_Part of the [ABI](https://docs.example/guide/abi.html)._\n\nDoes things."


def test_text_that_markdown_would_misread_is_escaped() -> None:
    text = md(
        "<p>Call __init__ or snake_case, 2*3*4, &lt;script&gt; here; <code>__init__</code>, <code>a`b</code>.</p>"
    )
    assert text == r"Call \_\_init\_\_ or snake_case, 2\*3\*4, \<script> here; `__init__`, `` a`b ``."


def test_emphasis_spacing_follows_the_html() -> None:
    assert md("<p><strong>PEP 8</strong>: style, <em>**</em><em><span>kw</span><span>args</span></em></p>") == (
        r"**PEP 8**: style, _\*\*_ _kwargs_"
    )


def test_empty_links_are_dropped_and_broken_markup_still_converts() -> None:
    text = md("<main><p>a <a href='x'></a>b</p></div><p>unclosed <b>bold<li>item</main><p>after</p>")
    assert "[]" not in text and "a b" in text and "item" in text and "after" not in text


def test_a_quote_outside_lists_stays_a_quote() -> None:
    assert md("<blockquote><p>A quote</p><ul><li>in a list</li></ul></blockquote>").startswith(
        "> A quote\n> \n>   * in a list"
    )


def test_end_tags_that_html_leaves_out_are_implied() -> None:
    page = "<p>one<p>two<ul><li>a<li>b</ul><table><tr><th>k<th>v<tr><td>x<td>1</table><p><a href='/a'>A<a href='/b'>B"
    assert md(page) == (
        "one\n\ntwo\n\n  * a\n  * b\n\nk| v  \n---|---  \nx| 1  \n\n[A](https://docs.example/a)[B](https://docs.example/b)"
    )
