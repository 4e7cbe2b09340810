"""Which reasoning levels a model accepts (HARNESS §2), by provider type and model id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

REASONING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")


@dataclass(frozen=True, slots=True)
class ReasoningSupport:
    levels: tuple[str, ...]
    off_behavior: Literal["off", "default"]
    supports_effort_none: bool


def _openai(model: str) -> ReasoningSupport | None:
    if re.match(r"^o[134](-|$)", model):
        return ReasoningSupport(("low", "medium", "high"), "default", False)
    m = re.match(r"^gpt-(\d+)(?:\.(\d+))?", model)
    if not m:
        return None
    major, minor = int(m.group(1)), int(m.group(2) or 0)
    if major < 5:
        return None
    if major > 5 or minor >= 2:
        return ReasoningSupport(("low", "medium", "high", "xhigh"), "off", True)
    if minor == 1:
        return ReasoningSupport(("low", "medium", "high"), "off", True)
    if model.startswith("gpt-5-chat"):
        return None
    return ReasoningSupport(("minimal", "low", "medium", "high"), "default", False)


def _anthropic(model: str) -> ReasoningSupport | None:
    m = re.match(r"^claude-(\d+)-(\d+)", model)
    versioned = m is not None and (int(m.group(1)), int(m.group(2))) >= (3, 7)
    family_first = re.match(r"^claude-[a-z]+-\d", model) is not None
    if versioned or family_first:
        return ReasoningSupport(("minimal", "low", "medium", "high"), "off", False)
    return None


def _google(model: str) -> ReasoningSupport | None:
    m = re.match(r"^gemini-(\d+)(?:\.(\d+))?", model)
    if not m or (int(m.group(1)), int(m.group(2) or 0)) < (2, 5):
        return None
    return ReasoningSupport(("minimal", "low", "medium", "high"), "default" if "-pro" in model else "off", False)


def model_reasoning_support(provider_type: str, model: str) -> ReasoningSupport | None:
    """The reasoning levels `model` accepts on a provider of `provider_type`, or None when it takes none."""
    table = {"openai": _openai, "anthropic": _anthropic, "google": _google}
    fn = table.get(provider_type)
    return fn(model) if fn else None
