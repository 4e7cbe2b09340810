"""Pictures as inline SVG, drawn on the server from the view data: the run tree, a Gantt of the tree's runs, token
usage per child as bars, and plan progress as a stacked bar. No script draws them, so they read the same in a
screenshot, a saved page and a browser without JavaScript.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from html import escape
from typing import Any

STATUS_COLORS = {
    "succeeded": "#2e9d5b",
    "done": "#2e9d5b",
    "failed": "#d0443e",
    "canceled": "#8a8f98",
    "skipped": "#b5b9c0",
    "running": "#2f6fde",
    "claimed": "#5b8ce6",
    "waiting": "#d99a1e",
    "queued": "#9aa7bd",
    "pending": "#d5d9e0",
}
ROW = 30
_WIDTH = 720


def color(status: str) -> str:
    return STATUS_COLORS.get(status, "#9aa7bd")


def _walk(
    node: Mapping[str, Any], depth: int = 0, parent: str | None = None
) -> Iterator[tuple[int, Mapping[str, Any], str | None]]:
    yield depth, node, parent
    for child in node.get("children", []):
        yield from _walk(child, depth + 1, node["id"])


def flatten(node: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any], str | None]]:
    """(depth, node, parent id) in display order: each node, then its children."""
    return list(_walk(node))


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_tree(node: Mapping[str, Any], *, link: str = "/runs/") -> str:
    """The tree as boxes joined by elbows, one row per run, each box linking to its run's page."""
    rows = flatten(node)
    where: dict[str, tuple[int, int]] = {}
    parts: list[str] = []
    for i, (depth, n, parent) in enumerate(rows):
        x, y = 8 + depth * 28, 6 + i * ROW
        where[n["id"]] = (x, y)
        if parent is not None and parent in where:
            px, py = where[parent]
            parts.append(
                f'<path d="M{px + 10},{py + 20} V{y + 11} H{x}" fill="none" stroke="#c4c9d2" stroke-width="1.5"/>'
            )
        tokens = int(n.get("usageRolledUp", {}).get("total", 0))
        label = escape(_short(str(n.get("title", "")), 60))
        parts.append(
            f'<a href="{link}{escape(n["id"])}" class="tree-node" data-run="{escape(n["id"])}" '
            f'data-status="{escape(n["status"])}">'
            f'<rect x="{x}" y="{y}" width="{_WIDTH - x - 8}" height="22" rx="5" fill="#fff" '
            f'stroke="{color(n["status"])}" stroke-width="1.5"/>'
            f'<circle cx="{x + 11}" cy="{y + 11}" r="5" fill="{color(n["status"])}"/>'
            f'<text x="{x + 22}" y="{y + 15}" font-size="12">{label}</text>'
            f'<text x="{_WIDTH - 16}" y="{y + 15}" font-size="11" text-anchor="end" fill="#596070">'
            f"{escape(n['status'])} · {tokens} tok</text></a>"
        )
    height = 12 + len(rows) * ROW
    return (
        f'<svg class="run-tree" role="img" aria-label="run tree" viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" '
        f'height="{height}" xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


def gantt(node: Mapping[str, Any], now: int) -> str:
    """Each run's life as a bar on one time axis: queued (pale) from creation to start, then its status colour
    from start to end (to now while it lives)."""
    rows = flatten(node)
    start = min(int(n["createdAt"]) for _, n, _ in rows)
    end = max(int(n.get("finishedAt") or now) for _, n, _ in rows)
    span = max(1, end - start)
    left, width = 200, _WIDTH - 210

    def x(t: int) -> float:
        return left + (t - start) * width / span

    parts = [
        f'<text x="{left}" y="12" font-size="10" fill="#596070">0 s</text>',
        f'<text x="{left + width}" y="12" font-size="10" fill="#596070" text-anchor="end">{span / 1000:.1f} s</text>',
    ]
    for i, (depth, n, _) in enumerate(rows):
        y = 20 + i * 22
        created, began = int(n["createdAt"]), n.get("startedAt")
        finished = int(n.get("finishedAt") or now)
        parts.append(
            f'<text x="{4 + depth * 10}" y="{y + 12}" font-size="11">{escape(_short(str(n["title"]), 28))}</text>'
        )
        queued_to = int(began) if began is not None else finished
        parts.append(
            f'<rect x="{x(created):.1f}" y="{y + 3}" width="{max(1.0, x(queued_to) - x(created)):.1f}" height="10" '
            f'fill="#e3e7ee"/>'
        )
        if began is not None:
            parts.append(
                f'<rect class="bar" data-run="{escape(n["id"])}" x="{x(int(began)):.1f}" y="{y + 1}" '
                f'width="{max(2.0, x(finished) - x(int(began))):.1f}" height="14" rx="3" fill="{color(n["status"])}">'
                f"<title>{escape(str(n['title']))}: {escape(n['status'])}, {(finished - int(began)) / 1000:.1f} s"
                "</title></rect>"
            )
    height = 26 + len(rows) * 22
    return (
        f'<svg class="gantt" role="img" aria-label="timeline of the runs" viewBox="0 0 {_WIDTH} {height}" '
        f'width="{_WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


def usage_bars(items: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Tokens per child (input and output stacked), scaled to the largest."""
    if not items:
        return ""
    top = max(1, *(int(u.get("total", 0)) for _, u in items))
    left, width = 200, _WIDTH - 280
    parts = []
    for i, (label, usage) in enumerate(items):
        y = 4 + i * 20
        given, made = int(usage.get("input", 0)), int(usage.get("output", 0))
        w_in, w_out = given * width / top, made * width / top
        parts.append(f'<text x="4" y="{y + 12}" font-size="11">{escape(_short(label, 30))}</text>')
        parts.append(f'<rect x="{left}" y="{y + 2}" width="{w_in:.1f}" height="12" fill="#7aa2e8"/>')
        parts.append(f'<rect x="{left + w_in:.1f}" y="{y + 2}" width="{w_out:.1f}" height="12" fill="#2f4f8f"/>')
        parts.append(
            f'<text x="{left + w_in + w_out + 6:.1f}" y="{y + 12}" font-size="11" fill="#596070">'
            f"{int(usage.get('total', 0))} tok</text>"
        )
    height = 8 + len(items) * 20
    return (
        f'<svg class="usage-chart" role="img" aria-label="tokens per child" viewBox="0 0 {_WIDTH} {height}" '
        f'width="{_WIDTH}" height="{height}" xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>'
    )


def plan_progress(steps: Sequence[Mapping[str, Any]]) -> str:
    """The plan as one bar: a segment per status, done first."""
    if not steps:
        return ""
    order = ("done", "failed", "skipped", "running", "pending")
    counts = {s: sum(1 for step in steps if step.get("status") == s) for s in order}
    width, x, parts = 300.0, 0.0, []
    for status in order:
        if counts[status]:
            w = counts[status] * width / len(steps)
            parts.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="10" fill="{color(status)}"/>')
            x += w
    done = counts["done"]
    return (
        f'<svg class="plan-progress" role="img" aria-label="{done} of {len(steps)} steps done" viewBox="0 0 300 10" '
        f'width="300" height="10" xmlns="http://www.w3.org/2000/svg"><rect width="300" height="10" rx="5" '
        f'fill="#eef0f4"/>{"".join(parts)}</svg>'
    )


__all__ = ["STATUS_COLORS", "color", "flatten", "gantt", "plan_progress", "run_tree", "usage_bars"]
