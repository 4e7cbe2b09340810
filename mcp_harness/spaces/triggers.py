"""The `~/triggers/` space: the agent's automations, listed, read with their last firings, written and deleted
(HARNESS §10 `triggersListing`, `writeTriggerAddress`).

A trigger is the agent's own: it is listed, read and written only through its agent, and a write is honored at once
(no consent step: the reference's deliberate product decision, see its security notes) — a firing acts with the
agent's grants and scope, nothing more. Names need not be unique; an ambiguous name is refused with the ids that
tell the triggers apart, and an id works wherever a name does.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mcp_harness.addresses import Address
from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.spaces.space import ResourceForm, Space, markdown_resource
from mcp_harness.store._util import iso_time
from mcp_harness.store.triggers import FiringRecord, TriggerRecord, TriggerStore
from mcp_harness.triggers.schedule import next_due_at
from mcp_harness.triggers.sources import CONTRACT, MAX_SHORT_BYTES, SHAPE, normalize_body, utf8_size, when
from mcp_harness.verbs.base import VerbContext, VerbResult, refuse_unknown_options

READ_OPTIONS: tuple[str, ...] = ()
WRITE_OPTIONS = ("delete", "trigger")
RECENT_FIRINGS = 5


def _store(ctx: VerbContext) -> TriggerStore:
    return TriggerStore(ctx.services.db)


def entry(trigger: TriggerRecord) -> dict[str, Any]:
    """A trigger as listings show it (`~/triggers/`, `~/self`)."""
    out: dict[str, Any] = {
        "name": trigger.name,
        "id": trigger.id,
        "status": "active" if trigger.enabled else "disabled",
        "type": trigger.source_type,
        "when": when(trigger.source),
    }
    if trigger.last_fired_at is not None:
        out["lastFiredAt"] = trigger.last_fired_at
    if trigger.last_error:
        out["lastError"] = trigger.last_error
    return out


def entries(ctx: VerbContext) -> list[dict[str, Any]]:
    """The agent's triggers as listing entries, most recently updated first."""
    return [entry(t) for t in _store(ctx).of_agent(ctx.agent.id)]


def _line(e: dict[str, Any]) -> str:
    status = "" if e["status"] == "active" else " (disabled)"
    error = f" — last error: {e['lastError']}" if e.get("lastError") else ""
    return f"- {e['name']}{status} — {e['when']}{error}"


def _listing(ctx: VerbContext, fmt: str, summary: str | None = None) -> VerbResult:
    listed = entries(ctx)
    count = len(listed)
    default = (
        f"{count} trigger{'s' if count != 1 else ''}. Read ~/triggers/<name> for one; write ~/triggers/<name> to "
        "create or edit one."
    )
    data = {"summary": summary or default, "triggers": listed, "contract": CONTRACT}
    lines = "\n".join(_line(e) for e in listed) or "(none yet)"
    return VerbResult.of(data, f"{lines}\n\n{CONTRACT}", fmt=fmt)


def _matches(ctx: VerbContext, name: str) -> list[TriggerRecord]:
    """By exact name (newest first), else by id; only the agent's own."""
    store = _store(ctx)
    named = store.named(ctx.agent.id, name)
    if named:
        return named
    by_id = store.get(name)
    return [by_id] if by_id is not None and by_id.agent_id == ctx.agent.id else []


def _ambiguous(name: str, matches: list[TriggerRecord]) -> BadRequest:
    ids = ", ".join(f"~/triggers/{t.id}" for t in matches)
    return BadRequest(f'{len(matches)} triggers are named "{name}" — read one by id instead: {ids}.')


def _firing(f: FiringRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"firingId": f.id}
    if f.session_id is not None:
        out["sessionId"] = f.session_id
        out["thread"] = f"thread:{f.session_id}"
    out["status"] = f.status
    if f.error:
        out["error"] = f.error
    out["firedAt"] = f.fired_at
    return out


def read_triggers(ctx: VerbContext, address: Address, options: dict[str, Any], fmt: str) -> VerbResult:
    """`~/triggers/` lists the agent's triggers; `~/triggers/<name>` is one, with its last 5 firings."""
    refuse_unknown_options(f"read {address.raw or '~/triggers/'}", options, READ_OPTIONS)
    if address.listing:
        return _listing(ctx, fmt)
    name = address.rest
    matches = _matches(ctx, name)
    if not matches:
        return _listing(ctx, fmt, f"No trigger named {name}.")
    if len(matches) > 1:
        raise _ambiguous(name, matches)
    t = matches[0]
    line = when(t.source)
    data: dict[str, Any] = {
        "summary": f'Trigger "{t.name}" ({"enabled" if t.enabled else "disabled"}): {line}.',
        "id": t.id,
        "name": t.name,
        "enabled": t.enabled,
        "when": line,
        "source": t.source,
        "prompt": t.prompt,
    }
    if t.continuation is not None:
        data["continuation"] = t.continuation
    if t.source_type == "webhook":
        data["webhook"] = _webhook(t, None)
    data |= {"createdAt": t.created_at, "updatedAt": t.updated_at}
    if t.last_fired_at is not None:
        data["lastFiredAt"] = t.last_fired_at
    if t.last_error:
        data["lastError"] = t.last_error
    data["recentFirings"] = [_firing(f) for f in _store(ctx).recent_firings(t.id, RECENT_FIRINGS)]
    firings = [
        f"- {iso_time(f['firedAt'])} {f['status']}"
        + (f" {f['thread']}" if "thread" in f else "")
        + (f" — {f['error']}" if "error" in f else "")
        for f in data["recentFirings"]
    ]
    body = (
        f"## Prompt\n\n{t.prompt}\n\n## Source\n\n```json\n{json.dumps(t.source, indent=2, ensure_ascii=False)}\n```"
        f"\n\n## Recent firings\n\n{chr(10).join(firings) or '(none yet)'}"
    )
    return VerbResult.of(data, body, fmt=fmt)


def _body(name: str, content: object, options: dict[str, Any]) -> object:
    if isinstance(content, str):
        try:
            return json.loads(content)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"write ~/triggers/{name} expects JSON content: {SHAPE} ({exc.msg}).") from None
    if "trigger" in options:
        return options["trigger"]
    raise BadRequest(f"write ~/triggers/{name} expects JSON content (or options.trigger): {SHAPE}.")


def _scoped_run_filter(ctx: VerbContext, source: dict[str, Any]) -> dict[str, Any]:
    """A run-completed filter names an agent the writer may act as (by name or id, stored as its id); a writer
    confined to one agent watches only that agent's runs."""
    if source["type"] != "run-completed":
        return source
    wanted = source.get("agentId")
    if wanted is None:
        return {**source, "agentId": ctx.agent.id} if ctx.scope.confined else source
    agent = ctx.services.agents.find(ctx.agent.account_id, wanted)
    if agent is None or not ctx.scope.may_act_as(agent):
        raise NotFound(f"No agent {wanted!r} for source.agentId; give the name or id of an agent you may act as.")
    return {**source, "agentId": agent.id}


def write_trigger(
    ctx: VerbContext, address: Address, content: object, options: dict[str, Any], dry_run: bool
) -> VerbResult:
    """Create, edit or delete the trigger the address names."""
    name = address.rest
    if "/" in name:
        raise BadRequest(f"A trigger name cannot contain '/': write ~/triggers/<name>, not {address.raw}.")
    if utf8_size("The trigger name", name) > MAX_SHORT_BYTES:
        raise BadRequest(f"A trigger name is at most {MAX_SHORT_BYTES} bytes.")
    refuse_unknown_options(f"write ~/triggers/{name}", options, WRITE_OPTIONS)
    if "delete" in options and not isinstance(options["delete"], bool):
        raise BadRequest("write ~/triggers option delete must be true (or left out).")
    matches = _matches(ctx, name)
    if len(matches) > 1:
        raise _ambiguous(name, matches)
    existing = matches[0] if matches else None
    store = _store(ctx)
    if options.get("delete") is True:
        if existing is None:
            return VerbResult.of(
                {"summary": f"No trigger named {name}; nothing to delete.", "name": name, "deleted": False}
            )
        store.delete(existing.id)  # a webhook's sealed secret goes with the row (store/triggers.py's SQL trigger)
        return VerbResult.of(
            {
                "summary": f'Deleted trigger "{existing.name}".',
                "name": existing.name,
                "id": existing.id,
                "deleted": True,
            }
        )
    spec = normalize_body(name, _body(name, content, options))
    source = _scoped_run_filter(ctx, spec.source)
    schedule = source.get("schedule") if source["type"] == "schedule" else None

    def next_due(created_at: int, last_fired_at: int | None) -> int | None:
        if schedule is None:
            return None
        return next_due_at(schedule, created_at=created_at, last_fired_at=last_fired_at)

    was_webhook = existing is not None and existing.source_type == "webhook"
    secret: str | None = None
    with ctx.services.db.transaction():  # the trigger and its webhook secret, or neither
        # An id in the address edits that trigger and keeps its name; a name names (or creates) it.
        saved = store.save(
            account_id=ctx.agent.account_id,
            agent_id=ctx.agent.id,
            name=existing.name if existing is not None else name,
            enabled=spec.enabled,
            source=source,
            prompt=spec.prompt,
            continuation=spec.continuation,
            next_due=next_due,
            trigger_id=existing.id if existing is not None else None,
        )
        if saved.source_type == "webhook" and not was_webhook:
            from mcp_harness.triggers.webhooks import issue_secret  # the firing path: not needed at start-up

            secret = issue_secret(ctx.services.secrets, saved)
        elif was_webhook and saved.source_type != "webhook":
            from mcp_harness.triggers.webhooks import drop_secret

            drop_secret(ctx.services.secrets, saved.account_id, saved.id)
    state = "enabled" if saved.enabled else "disabled"
    data: dict[str, Any] = {
        "summary": f'Saved trigger "{saved.name}" ({state}): {when(saved.source)}.',
        "id": saved.id,
        "name": saved.name,
        "enabled": saved.enabled,
        "source": saved.source,
    }
    if saved.source_type != "webhook":
        return VerbResult.of(data)
    data["webhook"] = _webhook(saved, secret)
    body = f"POST deliveries to {data['webhook']['url']}." + (
        f"\n\nSecret (shown only now): {secret}\n\n{SIGNING}" if secret is not None else ""
    )
    result = VerbResult.of(data, body)
    if secret is None:
        return result
    kept = {**data, "webhook": {**data["webhook"], "secret": "(shown once to the writer; not kept in the transcript)"}}
    return dataclasses.replace(result, logged=kept)


SIGNING = (
    "Sign each body with it: header X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body under the secret> "
    "(GitHub's webhook convention). A delivery id (X-GitHub-Delivery, X-Webhook-Delivery or Idempotency-Key) makes "
    "a replay fire once; without one, the same body is a replay."
)


def _webhook(trigger: TriggerRecord, secret: str | None) -> dict[str, Any]:
    """Where a webhook trigger is called; its secret only in the result of the write that created it."""
    from mcp_harness.triggers.webhooks import hook_path

    out: dict[str, Any] = {"url": hook_path(trigger.id)}
    if secret is not None:
        out |= {"secret": secret, "signature": SIGNING, "note": "The secret is shown only now; it is stored sealed."}
    else:
        out["note"] = "Its secret was shown once, when it was created; delete and recreate the trigger for a new one."
    return out


def _names_one(address: Address) -> bool:
    return not address.listing


SPACE = Space(
    name="triggers",
    kinds=("triggers",),
    read=read_triggers,
    read_options=READ_OPTIONS,
    read_form="~/triggers/, ~/triggers/<name>",
    read_line="""- `~/triggers/`: your automations and the shapes to write one; `~/triggers/<name>`: one, with its last firings.""",  # noqa: E501
    read_details="""## `~/triggers/` and `~/triggers/<name>` (also `harness://triggers/<name>`)
- `~/triggers/` lists your triggers, most recently updated first: {summary, triggers: [{name, id, status: "active" | "disabled", type, when, lastFiredAt?, lastError?}], contract} (the contract gives every source and continuation shape).
- `~/triggers/<name>` (or its id): {id, name, enabled, when, source, prompt, continuation?, createdAt, updatedAt, lastFiredAt?, lastError?, recentFirings: the last 5 [{firingId, sessionId?, thread?, status, error?, firedAt}]}. An unknown name gives the listing; a name several triggers share is refused with their ids. Times are epoch milliseconds. It takes no options.""",  # noqa: E501
    write=write_trigger,
    write_options=WRITE_OPTIONS,
    writes=_names_one,
    write_form="~/triggers/<name> (JSON content, or options {trigger} / {delete: true})",
    write_line="""- `~/triggers/<name>`: create or edit an automation from JSON `content` {source, prompt, enabled?, continuation?} (shapes: read ~/triggers/); {delete: true} removes it.""",  # noqa: E501
    write_details=f"""## `~/triggers/<name>`
{CONTRACT}
- The address names the trigger (a name in the body is ignored; an id edits that trigger). Writing an existing name replaces its definition and keeps its id and firing history; a name several triggers share is refused with their ids. It takes effect at once. Result: {{summary, id, name, enabled, source}}.
- Firings: a schedule fires once per occurrence, a missed period once when the server is back; `once` is disabled after it fires; run-completed firings stop at a loop (a trigger already in the chain, or 8 hops). A firing's thread is titled `<name> — <what happened>`.""",  # noqa: E501
    resources=(
        ResourceForm(
            "trigger",
            "Trigger",
            "harness://triggers/{name}",
            "One of the agent's triggers with its last firings, as markdown.",
            "text/markdown",
        ),
    ),
    resource_read=markdown_resource(read_triggers),
)
