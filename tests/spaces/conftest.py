"""What the `hm://` suites share: an identity `alice` the default agent may sign as, granting identities and tools,
and the block ids of a markdown read."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity


def grant(harness: Harness, *identities: Identity, tools: list[str] | None = None) -> None:
    agent = harness.agent()
    raw: dict[str, Any] = {**agent.definition.to_json(), "signingKeys": [i.name for i in identities]}
    raw.pop("tools", None)
    if tools is not None:
        raw["tools"] = tools
    harness.agents.update(agent.id, normalize_definition(raw))


@pytest.fixture
def alice(harness: Harness) -> Identity:
    identity = create_identity(harness, "Alice")
    grant(harness, identity)
    return identity


def ids_of(markdown: str) -> list[str]:
    return re.findall(r"<!-- id:([A-Za-z0-9_-]+) -->", markdown)
