"""A hypermedia block tree as HTML for the Documents pages, built only from escaped text and a fixed set of tags.

Documents are other people's content, so nothing in a block is ever passed through as markup: text is escaped,
inline annotations become a closed set of tags (each run of text between two annotation boundaries is wrapped on its
own, so overlapping spans can never produce broken nesting), and a link keeps its target only when it is http(s),
mailto, ipfs (served here at `/ipfs/<cid>`) or hm (opened in the console's own Documents page). Media are links, not
loaded: the console's CSP allows no outside images anyway, and a page should not fetch what a stranger names.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from urllib.parse import urlencode

from mcp_harness.hypermedia.blocks import Block, BlockNode

INLINE_TAGS = (("Bold", "strong"), ("Italic", "em"), ("Underline", "u"), ("Strike", "s"), ("Code", "code"))
"""Annotation type → tag, outermost first (a link wraps them all)."""
LINKING = ("Link", "Embed")
MEDIA = ("Image", "Video", "File", "WebEmbed")
LISTS = {"Ordered": "ol", "Unordered": "ul"}


def href(link: str | None) -> str | None:
    """Where a link may point from the console, or None for anything else (javascript:, data:, …)."""
    if not link:
        return None
    lowered = link.lower()
    if lowered.startswith(("https://", "http://", "mailto:")):
        return link
    if lowered.startswith("ipfs://"):
        return "/ipfs/" + link[len("ipfs://") :]
    if lowered.startswith("hm://"):
        body = link[len("hm://") :].split("#", 1)[0]
        target, _, query = body.partition("?")
        account, _, path = target.partition("/")
        params = {"path": "/" + path} if path else {}
        version = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("v")
        if version:
            params["v"] = version
        return f"/documents/{account}" + (f"?{urlencode(params)}" if params else "")
    return None


def _anchor(text: str, link: str | None) -> str:
    target = href(link)
    if target is None:
        return text
    return f'<a href="{escape(target)}" rel="noopener noreferrer nofollow">{text}</a>'


def inline(block: Block) -> str:
    """The block's text with its annotations as tags."""
    text = block.text
    cuts = {0, len(text)}
    for annotation in block.annotations:
        for start, end in zip(annotation.starts, annotation.ends, strict=False):
            cuts.update((max(0, min(start, len(text))), max(0, min(end, len(text)))))
    bounds = sorted(cuts)
    out: list[str] = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        if start >= end:
            continue
        active = [
            a for a in block.annotations if any(s <= start and end <= e for s, e in zip(a.starts, a.ends, strict=False))
        ]
        piece = escape(text[start:end]).replace("\n", "<br>")
        types = {a.type for a in active}
        for kind, tag in reversed(INLINE_TAGS):
            if kind in types:
                piece = f"<{tag}>{piece}</{tag}>"
        link = next((a.link for a in active if a.type in LINKING and a.link), None)
        out.append(_anchor(piece, link) if link else piece)
    return "".join(out)


def block_html(node: BlockNode, depth: int = 0) -> str:
    block = node.block
    kind = block.type
    if kind == "Heading":
        level = min(3 + depth, 6)
        own = f"<h{level}>{inline(block)}</h{level}>"
    elif kind in ("Code", "Math"):
        language = block.attributes.get("language")
        label = f' data-language="{escape(str(language))}"' if isinstance(language, str) and language else ""
        own = f'<pre class="{kind.lower()}"{label}><code>{escape(block.text)}</code></pre>'
    elif kind in MEDIA:
        name = block.attributes.get("name")
        title = escape(str(name)) if isinstance(name, str) and name else escape(block.link or kind.lower())
        own = f'<p class="media">{escape(kind)}: {_anchor(title, block.link)}</p>'
    elif kind == "Embed":
        own = f'<p class="embed">Embedded: {_anchor(escape(block.link or ""), block.link)}</p>'
    elif kind == "Button":
        own = f'<p class="button">{_anchor(escape(block.text or block.link or "button"), block.link)}</p>'
    else:
        own = f"<p>{inline(block)}</p>" if block.text else ""
    return own + children_html(node.children, block.children_type, depth + 1)


def children_html(children: Sequence[BlockNode], children_type: str | None, depth: int = 0) -> str:
    if not children:
        return ""
    tag = LISTS.get(children_type or "")
    if tag:
        items = "".join(f"<li>{block_html(c, depth)}</li>" for c in children)
        return f"<{tag}>{items}</{tag}>"
    inner = "".join(block_html(c, depth) for c in children)
    if children_type == "Blockquote":
        return f"<blockquote>{inner}</blockquote>"
    return inner if depth == 0 else f'<div class="children">{inner}</div>'


def tree_html(tree: Sequence[BlockNode]) -> str:
    """A whole document (or comment) body."""
    return children_html(tree, None)


__all__ = ["block_html", "href", "inline", "tree_html"]
