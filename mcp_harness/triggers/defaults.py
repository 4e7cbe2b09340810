"""The default mention trigger (HARNESS §10 `#createDefaultMentionTrigger`): an agent created with a signing
identity as its primary key answers @-mentions of that account from the start.

Created in the agent's creation transaction (`Harness.create_agent`, the one place agents are created), under a
savepoint: a failure is logged and never blocks the agent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from mcp_harness.identity.identities import IDENTITY_KIND

if TYPE_CHECKING:
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.db import Database
    from mcp_harness.store.secrets import SecretStore
    from mcp_harness.store.triggers import TriggerRecord, TriggerStore

logger = logging.getLogger(__name__)

MENTION_PROMPT = "Respond to the mention, performing the action requested."


class DefaultsHost(Protocol):
    @property
    def db(self) -> Database: ...
    @property
    def secrets(self) -> SecretStore: ...
    @property
    def triggers(self) -> TriggerStore: ...


def mention_account(host: DefaultsHost, agent: AgentRecord) -> str | None:
    """The account id of the agent's primary signing key (`signingKey ?? signingKeys[0]`) when it is an identity."""
    definition = agent.definition
    primary = definition.signing_key or (definition.signing_keys[0] if definition.signing_keys else None)
    if not primary:
        return None
    record = host.secrets.find(agent.account_id, primary)  # metadata only: the master key is not needed
    if record is None or record.kind != IDENTITY_KIND:
        return None
    account = record.metadata.get("accountId")
    return account if isinstance(account, str) and account else None


def create_default_mention_trigger(host: DefaultsHost, agent: AgentRecord) -> TriggerRecord | None:
    """`Mentions of <agent name>`, enabled, on mentions of the primary identity's account. Blocking."""
    try:
        with host.db.transaction():
            account = mention_account(host, agent)
            if account is None:
                return None
            return host.triggers.save(
                account_id=agent.account_id,
                agent_id=agent.id,
                name=f"Mentions of {agent.definition.name}",
                enabled=True,
                source={"type": "user-mention", "mentionedAccounts": [account]},
                prompt=MENTION_PROMPT,
                continuation=None,
                next_due=lambda created_at, last_fired_at: None,
            )
    except Exception:  # the agent stands without it; the owner can write the trigger by hand
        logger.exception("Creating the default mention trigger of agent %s failed", agent.id)
        return None


__all__ = ["MENTION_PROMPT", "create_default_mention_trigger", "mention_account"]
