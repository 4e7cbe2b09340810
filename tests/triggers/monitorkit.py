"""What the activity-trigger suites share: an agent that signs as an identity, someone else's key, a watched
document, and an activity trigger written the way an agent writes one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity, load_keypair
from mcp_harness.identity.keys import KeyPair
from mcp_harness.store.agents import AgentRecord
from mcp_harness.store.triggers import TriggerRecord
from tests.hypermedia.activity_kit import create


@dataclass
class World:
    """Alice is the agent's identity; Bob is someone else, whose key this harness does not hold."""

    harness: Harness
    agent: AgentRecord
    alice: Identity
    alice_key: KeyPair
    bob: KeyPair

    @property
    def post(self) -> str:
        return f"hm://{self.alice.account_id}/post"


def agent_signing_as(harness: Harness, name: str, *identities: Identity, tools: list[str] | None = None) -> AgentRecord:
    """A new agent (created the one way agents are, so it gets its default mention trigger) that signs as
    `identities`."""
    raw: dict[str, Any] = {**harness.default_definition().to_json(), "name": name}
    raw["signingKeys"] = [i.name for i in identities]
    if tools is not None:
        raw["tools"] = tools
    definition = normalize_definition(raw)
    harness.check_definition(definition)
    return harness.create_agent(definition)


def world(harness: Harness) -> World:
    """The default agent signing as Alice, Alice's `/post`, and Bob."""
    alice = create_identity(harness, "Alice")
    agent = harness.agent()
    raw = {**agent.definition.to_json(), "signingKeys": [alice.name]}
    agent = harness.agents.update(agent.id, normalize_definition(raw))
    key = load_keypair(harness, alice.name)
    create(harness.hypermedia, key, "/post", "A post.", name="Post")
    return World(harness, agent, alice, key, KeyPair.generate())


def watch(
    harness: Harness, agent: AgentRecord, name: str, source: dict[str, Any], *, enabled: bool = True
) -> TriggerRecord:
    """Save an activity trigger of `agent`, as `write ~/triggers/<name>` would (normalized, now)."""
    from mcp_harness.triggers.sources import normalize_source

    return harness.triggers.save(
        account_id=agent.account_id,
        agent_id=agent.id,
        name=name,
        enabled=enabled,
        source=normalize_source(source),
        prompt=f"Handle {name}.",
        continuation=None,
        next_due=lambda created_at, last_fired_at: None,
    )
