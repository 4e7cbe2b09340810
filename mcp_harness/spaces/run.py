"""The `run:<id>` space: a run's public record (the reading is in threads.py, next to the transcripts)."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.spaces import threads
from mcp_harness.spaces.space import Space
from mcp_harness.verbs.base import VerbContext, VerbResult


def read_run(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    return threads.read_run(ctx, address.rest, fmt)


def _names_a_run(address: Address) -> bool:
    """`run:` without an id names no run: it gets the refusal naming what this build reads, as it always has."""
    return bool(address.rest)


SPACE = Space(
    name="run",
    kinds=("run",),
    read=read_run,
    reads=_names_a_run,
    read_form="run:<id>",
    read_line="""- `run:<id>`: a run's status, wait, usage, plan, children, error and output.""",
    read_details="""## `run:<id>`
A run's public record — id, kind, status, title, what it waits on (`wait`), usage, plan, children ({id, status, title, sessionId}), error, output, unmetObligations — and a script's source as `sourceText`. A run you may not see reads as not found.""",  # noqa: E501
)
