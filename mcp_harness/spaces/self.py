"""The `~/self` space: the agent's definition, grants, signing identities and a memory summary (HARNESS §3)."""

from __future__ import annotations

from typing import Any

from mcp_harness.addresses import SELF_URI, Address
from mcp_harness.callables.registry import BUILTINS
from mcp_harness.grants import granted
from mcp_harness.spaces.space import ResourceForm, Space, markdown_resource
from mcp_harness.spaces.triggers import entries as trigger_entries
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

READ_OPTIONS: tuple[str, ...] = ()


def read_self(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    refuse_unknown_options("read ~/self", options, READ_OPTIONS)
    agent = ctx.agent
    definition = agent.definition
    summary_top = ctx.services.memory(agent).summarize_top_level()
    count = ctx.services.agents.count_sessions(agent.id)
    grants = ctx.services.grants(definition)
    triggers = trigger_entries(ctx)
    data: dict[str, Any] = {
        "summary": f'You are "{definition.name}" ({definition.model}) with {len(triggers)} '
        f"trigger{'s' if len(triggers) != 1 else ''} and {count} conversation{'s' if count != 1 else ''}.",
        "agentId": agent.id,
        "name": definition.name,
        "model": definition.model,
        "modelProvider": definition.model_provider,
    }
    if definition.reasoning_level:
        data["reasoningLevel"] = definition.reasoning_level
    data["systemPrompt"] = definition.system_prompt
    data["grants"] = grants
    unavailable = unavailable_grants(ctx, grants["callableTools"])
    if unavailable:
        data["unavailableGrants"] = unavailable
    identities: list[Any] = []
    if definition.signing_key or definition.signing_keys:
        # Imported here: only agents granted signing identities pay for loading the identity module (and PyNaCl).
        from mcp_harness.identity.identities import identities_of

        identities = identities_of(ctx.services, definition)
    if identities:
        data["signingKeys"] = [{"name": i.name, "label": i.label, "accountId": i.account_id} for i in identities]
    if definition.metadata:
        data["metadata"] = definition.metadata
    data["triggers"] = triggers
    data["memory"] = {"totalFiles": summary_top.total_files, "topLevel": summary_top.top_level}
    if not summary_top.complete:
        data["memory"]["totalFilesAtLeast"] = True  # the count stopped at its bound (memory/listing.py)
    if summary_top.more_top_level:
        data["memory"]["moreTopLevel"] = summary_top.more_top_level
    if summary_top.unaddressable:
        data["memory"]["unaddressableFiles"] = summary_top.unaddressable
    data["sessionCount"] = count
    data["guidance"] = [
        "Your memory (~/memory/) is yours to read and write freely (writes replace whole files); read ~/tools/ "
        "lists what you can do and ~/tools/<name> gives a full contract.",
        "Your triggers (~/triggers/) are yours to write: schedules and events that start work on their own.",
        "read thread: lists your conversations; thread:<id> reads one.",
        "Your definition (prompt, model, grants) is edited by your user, not by you.",
    ]
    memory_lines = "\n".join(f"- {line}" for line in summary_top.top_level) or "- (empty)"
    if summary_top.more_top_level:
        memory_lines += f"\n- … and {summary_top.more_top_level} more (read ~/memory/ to page through them)"
    counted = f"{'≥ ' if not summary_top.complete else ''}{summary_top.total_files} files"
    missing = "".join(f"- {u['tool']}: {u['reason']}\n" for u in unavailable)
    body = (
        f"## System prompt\n\n{definition.system_prompt}\n\n## Grants\n\n"
        f"- callable tools: {', '.join(grants['callableTools']) or '(none in this build)'}\n"
        f"- publish: {'yes' if grants['publish'] else 'no'}\n{missing}\n"
        f"## Memory ({counted})\n\n{memory_lines}"
    )
    if identities:
        signing_lines = "\n".join(f"- {i.label}: {i.account_id} (signing key `{i.name}`)" for i in identities)
        body += f"\n\n## Signing identities\n\n{signing_lines}"
    if triggers:
        trigger_lines = "\n".join(
            f"- {t['name']}{'' if t['status'] == 'active' else ' (disabled)'} — {t['when']}" for t in triggers
        )
        body += f"\n\n## Triggers\n\n{trigger_lines}"
    return VerbResult.of(data, body, fmt=fmt)


def unavailable_grants(ctx: VerbContext, usable: list[str]) -> list[dict[str, str]]:
    """Callables the definition grants that this host cannot run, each with why and what would fix it."""
    return [
        {"tool": tool.name, "reason": tool.reason_unavailable(ctx.services)}
        for tool in BUILTINS
        if tool.name not in usable and granted(ctx.agent.definition, tool.grant)
    ]


SPACE = Space(
    name="self",
    kinds=("self",),
    read=read_self,
    read_options=READ_OPTIONS,
    read_form="~/self",
    read_line="""- `~/self`: your definition, grants, signing identities and a memory summary.""",
    read_details="""## `~/self` (also `harness://self`)
{agentId, name, model, modelProvider, reasoningLevel?, systemPrompt, grants: {callableTools, publish}, unavailableGrants?: [{tool, reason}] (granted tools this host cannot run, and why), signingKeys?: [{name, label, accountId}], metadata?, triggers, memory: {totalFiles, topLevel}, sessionCount, guidance}. Your definition is edited by your user, not by you. It takes no options.""",  # noqa: E501
    resources=(
        ResourceForm(
            "self",
            "This agent",
            SELF_URI,
            "The agent's definition, grants and memory summary.",
            "text/markdown",
            template=False,
        ),
    ),
    resource_read=markdown_resource(read_self),
)
