"""Refusals for address forms and verbs that later builds add: clear, named, never a crash or a fake success."""

from __future__ import annotations

from mcp_harness.errors import BadRequest

_LATER: dict[str, str] = {
    "run": "Run journals (run:<id>)",
    "hm": "Hypermedia documents (hm://)",
    "tools": "Authored tools (~/tools/<name>)",
    "call": "The call verb (callable tools such as search, web_search and execute)",
    "delegate": "The delegate verb (child runs)",
    "return_result": "return_result (typed child results)",
}


WRITABLE_LATER: frozenset[str] = frozenset()
"""Address kinds no space serves yet that later builds write: a write to one (not a listing) gets `not_in_this_build`;
any other write address this build does not serve is unrecognized."""


def not_in_this_build(kind: str, supported: str) -> BadRequest:
    """The error for a form this build does not serve yet, naming what it does serve."""
    what = _LATER.get(kind, kind)
    return BadRequest(f"{what} is not available in this build of mcp-harness. Supported here: {supported}.")
