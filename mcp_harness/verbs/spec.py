"""The shape of a contract: what a verb or a callable tells the model about itself.

A leaf module: the verbs' registry (`contracts.py`) and every callable's contract (`callables/`) build on it, and
neither needs the other to say what a contract is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class VerbSpec:
    """One verb's contract, at two levels.

    `description` is what `tools/list` (and a server-run turn) shows: a line per address form or option, ending with
    where the full contract is. `details` is the rest of that contract — every form's options, results, limits and
    error codes — shown only by `read ~/tools/<name>` (`contract_markdown`), so the always-sent text stays small.
    """

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    details: str | None = None
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    @property
    def summary(self) -> str:
        """The first sentence of the description, at most 140 characters (the `~/tools` listing line)."""
        first = re.split(r"(?<=\.)\s", self.description, maxsplit=1)[0]
        return first if len(first) <= 140 else first[:137] + "…"

    def summary_line(self) -> str:
        return f"{self.name} — {self.summary}"

    def contract_markdown(self) -> str:
        """The full contract: the description, the details, then the schemas."""
        parts = [f"# {self.name}", "", self.description]
        if self.details:
            parts += ["", self.details.strip()]
        parts += ["", "## Input schema", "```json", json.dumps(self.input_schema, indent=2, ensure_ascii=False), "```"]
        if self.output_schema is not None:
            parts += ["", "## Output schema", "```json", json.dumps(self.output_schema, indent=2), "```"]
        return "\n".join(parts)
