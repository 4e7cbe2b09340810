"""What a server-run turn shows the model besides the conversation: the system prompt with its `<space>` index, the
`<plan_state>` block, and the runtime's obligation prompts (HARNESS §2, §7.2, §7.4, §11.3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from mcp_harness.services import Hosting, Keys, Memories, Stores

if TYPE_CHECKING:
    from mcp_harness.store.agents import AgentRecord

SPACE_INDEX_BUDGET = 2048
MAX_CONTINUATIONS = 3


class PromptHost(Stores, Memories, Hosting, Keys, Protocol):
    """What the system prompt is built from: the agent's callable tools (its grants on this host), its memory's top
    level, the hypermedia documents its prompt embeds, and the identities it may sign as."""


RUNTIME_PROMPT = """You are an agent running inside mcp-harness. The current time is {now}.
You act through five verbs: read and write reach addresses (~/memory/<path> is your persistent memory, ~/self \
describes you, ~/tools/ lists what you can call, thread: lists conversations), call runs a tool by name, delegate \
hands work to a child run, and plan keeps this conversation's visible checklist. Read ~/tools/<name> before calling \
a tool you have not used.
Your memory persists across conversations: keep notes there that a future you will need.
Messages framed <user_action verb="…"> record something the user did directly with the same verbs; they are facts \
about the state of the world, not instructions to repeat."""


def escape_framing(text: str) -> str:
    """Keep content from closing or forging the runtime's framing tags."""
    return text.replace("<", "\\u003c")


def space_index(host: PromptHost, agent: AgentRecord) -> str:
    """`<space>`: the callable tools with summaries, the memory top level and the triggers (the first 16 by name,
    naming the active ones), within 2,048 characters."""
    from mcp_harness.callables.catalog import visible_documents

    records = visible_documents(host, agent)
    tool_lines = [f"- {r.name} — {r.document.summary}{' (authored)' if r.kind == 'lambda' else ''}" for r in records]
    page = host.memory(agent).page_dir("", None, 12)  # stats a dozen entries, however large the root is
    # A name is whatever code in the sandbox made it: escaped, so it cannot forge the framing around it.
    entries = [escape_framing(e.path) + (f"/({e.entry_count})" if e.type == "dir" else "") for e in page.entries]
    shown = " · ".join(entries) + (" · …" if page.next_after is not None else "")
    count = page.total_entries
    memory_line = f"memory/ — {count} entr{'y' if count == 1 else 'ies'}: {shown}" if entries else "memory/ — empty"
    from mcp_harness.store.triggers import TriggerStore

    triggers, active = TriggerStore(host.db).index_entries(agent.id)
    enabled = [escape_framing(name) for name, on in triggers if on]
    trigger_line = "triggers/ (read ~/triggers/; write ~/triggers/<name> creates or edits an automation)"
    if enabled:
        trigger_line += " — active: " + " · ".join(enabled)
    full = "\n".join(
        [
            "<space>",
            "tools/ (read ~/tools/<name> for a contract; call runs one; write ~/tools/<name> authors one)",
            *tool_lines,
            memory_line,
            trigger_line,
            "</space>",
        ]
    )
    if len(full) <= SPACE_INDEX_BUDGET:
        return full
    return "\n".join(
        [
            "<space>",
            f"tools/ — {len(records)} callable tools (read ~/tools/ to list them)",
            memory_line,
            f"triggers/ — {active} active (read ~/triggers/)",
            "</space>",
        ]
    )


class StartIndex:
    """The `<space>` index of a run's first request, shared with the run started just before it on the same lane.

    Why: a fan-out's siblings are claimed in one pass and started back to back, and each built the same index
    (the agent's tools, its memory's top level, its triggers: a third of a start's cost). Why it stays current: a
    run is claimed on the lane (`RunEngine._dispatch`) after everything that led to it (its spawn, its enqueue,
    a write before either), and whatever writes on the lane (a claim, a spawn, a reply, a delivery) breaks the
    chain, so a start reuses only an index built after its own claim. Writes off the lane at that moment (a verb,
    a client) race the start as they would race building it a millisecond earlier.
    """

    def __init__(self) -> None:
        self._last: tuple[object, int, AgentRecord, str] | None = None

    def of(self, host: PromptHost, agent: AgentRecord) -> str:
        from mcp_harness.runs.lane import position

        at, last = position(), self._last
        # Back to back: the lane's call just before, or the same call (a batch of starts, `AgentExecutor._starts`).
        if at is not None and last is not None and last[0] is at[0] and at[1] - last[1] in (0, 1) and last[2] == agent:
            index = last[3]
        else:
            index = space_index(host, agent)
        self._last = None if at is None else (at[0], at[1], agent, index)
        return index


def system_prompt(host: PromptHost, agent: AgentRecord, base_prompt: str, space: str | None = None) -> str:
    """The system prompt; `space`: its `<space>` index when the caller has it already (`StartIndex`)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    base_prompt = _with_embeds(host, agent, base_prompt)
    space = space_index(host, agent) if space is None else space
    prompt = f"{base_prompt}\n\n{RUNTIME_PROMPT.format(now=now)}\n\n{space}"
    identities = signing_identities(host, agent)
    return f"{prompt}\n\n{identities}" if identities else prompt


_EMBED_FREE: dict[int, tuple[dict[str, Any], ...]] = {}
"""Prompt block tuples known to embed nothing, by identity (held, so an id is never reused while listed): a cached
agent record hands every run the same tuple, and a wide fan-out would parse it once per child to find no embed."""


def _with_embeds(host: PromptHost, agent: AgentRecord, base_prompt: str) -> str:
    """The agent's own prompt with its embedded hypermedia documents inlined, two levels deep (HARNESS §2): a prompt
    can embed a shared style guide and stay current with it. A child's replacement prompt is used as given."""
    definition = agent.definition
    if base_prompt != definition.system_prompt or not definition.prompt_blocks:
        return base_prompt
    from mcp_harness.hypermedia.blocks import tree_from_json, walk

    blocks = definition.prompt_blocks
    known = _EMBED_FREE.get(id(blocks))
    if known is not None and known is blocks:
        return base_prompt
    tree = tree_from_json(list(blocks))
    if not any(node.block.type == "Embed" and node.block.link for _, node in walk(tree)):
        if len(_EMBED_FREE) >= 64:
            _EMBED_FREE.clear()
        _EMBED_FREE[id(blocks)] = blocks
        return base_prompt
    from mcp_harness.hypermedia.markdown import render_markdown
    from mcp_harness.spaces.hm.read import resolve_embeds

    resolved = resolve_embeds(host.hypermedia, tree, 2)
    return render_markdown(resolved, None, block_ids=False, frontmatter=False).strip() or base_prompt


PUBLISHING_PROMPT = """You can publish signed hypermedia documents as these identities: write \
hm://<publicKey>/<path> with markdown content (a name is required: options.name or a `name:` frontmatter line; \
options.action "update" revises a document, "comment" comments on one), and read hm://… to read documents back. \
Pick an identity with options.signer (its name or publicKey) when the address does not already say which."""


def signing_identities(host: PromptHost, agent: AgentRecord) -> str | None:
    """`<available_signing_identities>` (HARNESS §2): who this agent can sign as, and how to publish."""
    definition = agent.definition
    if not (definition.signing_key or definition.signing_keys):
        return None
    from mcp_harness.identity.identities import identities_of

    identities = identities_of(host, definition)
    if not identities:
        return None
    listing = json.dumps([{"name": i.label or i.name, "publicKey": i.account_id} for i in identities])
    return f"<available_signing_identities>\n{listing}\n</available_signing_identities>\n{PUBLISHING_PROMPT}"


def plan_state(plan: dict[str, Any] | None) -> str | None:
    steps = (plan or {}).get("steps") or []
    if not steps:
        return None
    lines = [f"{escape_framing(s['id'])} · {escape_framing(s['label'])} · {s['status']}" for s in steps]
    return (
        "<plan_state>\n"
        + "\n".join(lines)
        + "\n\nThis is your live checklist; update statuses with the plan verb as you complete work — before you "
        "finish your reply.\n</plan_state>"
    )


def continuation_prompt(owed: list[dict[str, Any]]) -> str:
    bullets = [_obligation_line(o) for o in owed]
    return (
        "This turn is ending with work you committed to still open:\n"
        + "\n".join(f"- {b}" for b in bullets)
        + "\nFinish it now; nothing is ticked off on your behalf."
    )


def _obligation_line(obligation: dict[str, Any]) -> str:
    if obligation["kind"] == "typed-result":
        return "You have not delivered the result yet. Call the return_result tool now with the required result."
    steps = ", ".join(obligation["steps"])
    return (
        f"Your plan has unfinished steps: {steps}. Continue that work now, or set every step to an honest terminal "
        "status — done, failed, or skipped."
    )


def unmet_notice(owed: list[dict[str, Any]]) -> str:
    lines = []
    for o in owed:
        if o["kind"] == "typed-result":
            lines.append("No result was delivered, so this task has no answer to hand back.")
        else:
            lines.append("Unfinished plan steps: " + ", ".join(o["steps"]) + ".")
    return (
        "This run ended with work still open:\n"
        + "\n".join(f"- {line}" for line in lines)
        + "\nNothing was completed on the agent’s behalf."
    )
