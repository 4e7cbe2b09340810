"""The Triggers page's data: every visible agent's triggers with their source, state and latest firings (each
linking to the session and run it started)."""

from __future__ import annotations

from typing import Any, Protocol

from mcp_harness.scope import Scope
from mcp_harness.services import Stores
from mcp_harness.store.triggers import TriggerStore

FIRINGS_SHOWN = 10


class HasTriggers(Stores, Protocol):
    @property
    def triggers(self) -> TriggerStore: ...


def trigger_rows(stores: HasTriggers, scope: Scope) -> dict[str, Any]:
    rows = []
    for agent in stores.agents.list(scope.account_id):
        if not scope.may_act_as(agent):
            continue
        for t in stores.triggers.of_agent(agent.id):
            firings = [
                {
                    "id": f.id,
                    "status": f.status,
                    "sessionId": f.session_id,
                    "runId": f.run_id,
                    "summary": f.summary,
                    "error": f.error,
                    "firedAt": f.fired_at,
                }
                for f in stores.triggers.recent_firings(t.id, FIRINGS_SHOWN)
            ]
            rows.append(
                {
                    "id": t.id,
                    "agent": agent.definition.name,
                    "name": t.name,
                    "enabled": t.enabled,
                    "source": t.source,
                    "prompt": t.prompt,
                    "lastFiredAt": t.last_fired_at,
                    "lastError": t.last_error,
                    "nextDueAt": t.next_due_at,
                    "firings": firings,
                }
            )
    return {"triggers": rows}


__all__ = ["FIRINGS_SHOWN", "trigger_rows"]
