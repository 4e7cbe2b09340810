"""The single source of the verbs' names, descriptions, schemas and annotations.

Input schemas follow the reference harness's contracts (seed `tool-registry.ts`, the verb era) so a model trained
against either sees the same surface. Descriptions say what this server does; a form that a later build adds is
not promised here.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from mcp_harness.jsondepth import MAX_INPUT_DEPTH, depth_exceeds, surrogate_paths
from mcp_harness.schema_check import Check, compile_check
from mcp_harness.spaces.registry import read_details, read_lines, write_details, write_lines
from mcp_harness.verbs.spec import VerbSpec

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The MCP Tasks extension (SEP-2663): a client declaring it may get `delegate` as a task handle."""

ANY_JSON: dict[str, Any] = {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean", "null")]}
"""Any JSON value, with every branch typed: a six-member `type` array is a union that Ajv's strict mode refuses
(`strictTypes`: only `[T, "null"]` is allowed without `allowUnionTypes`), and an untyped property gives a client's
form builder nothing to dispatch on."""

# `read` and `write` are described space by space: each address space declares its lines and its section of the
# contract (spaces/registry.py), so a new space documents itself.
READ = VerbSpec(
    name="read",
    title="Read",
    read_only=True,
    idempotent=True,
    open_world=True,
    description=f"""Read anything you can address. The address picks the source:
{read_lines()}
`format: "json"` gives the structured form. Full contract (every form's options, results, limits): read ~/tools/read.""",
    details=read_details(),
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "address": {
                "type": "string",
                "minLength": 1,
                "description": "What to read, in a form listed above (or a harness:// resource URI).",
            },
            "format": {"type": "string", "enum": ["markdown", "json"], "description": "Defaults to markdown."},
            "options": {
                "type": "object",
                "description": "Per form: memory {offset, length} or {cursor, limit}; thread: {query, agentId, limit}; web {raw, offset, length}.",
            },
        },
        "required": ["address"],
    },
)

WRITE = VerbSpec(
    name="write",
    title="Write",
    destructive=True,
    open_world=True,
    description=f"""Write anything you can address. The address picks the destination:
{write_lines()}
Unknown option keys are refused. Full contract (each form's options, results, limits): read ~/tools/write.""",
    details=write_details(),
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "address": {
                "type": "string",
                "minLength": 1,
                "description": "Where to write: ~/memory/<path>, ~/tools/<name> or hm://<account>/<path>.",
            },
            "content": {
                "type": "string",
                "description": "Text of a memory file, a JSON tool document, or markdown for hm://.",
            },
            "options": {"type": "object", "description": "Per form, as listed above."},
            "dryRun": {"type": "boolean", "description": "hm:// only: check and build without publishing."},
        },
        "required": ["address"],
    },
)

CALL = VerbSpec(
    name="call",
    title="Call",
    open_world=True,
    description="""Run a callable tool by name with a JSON `input`. Callables are builtins this host offers you (`execute` runs code over your memory; `web_search` where configured) and the tools you authored; `~/tools/` lists them and `~/tools/<name>` gives a contract.
A miss does not fail: an unknown name returns the listing, and input the contract rejects returns the contract with the validation errors; read it and call again. Full contract: read ~/tools/call.""",
    details="""## What can be called
- Builtins that this host offers and your definition grants: `execute` (needs a working bubblewrap sandbox; `execute_code` is an alias) and `web_search` (needs `[web] searxng_url`). Their contracts are `~/tools/execute` and `~/tools/web_search`.
- Tools you authored with `write ~/tools/<name>`: they run in the execute sandbox, so they also need their runtime on this host and your `execute` grant.
- Not the verbs: call them directly.

## Misses never fail
- An unknown, ungranted or disabled name returns the listing {summary, markdown, tools, verbs} as an ordinary result: a tool you may not use is indistinguishable from one that does not exist.
- Input the tool's contract rejects returns {summary, contract, validationErrors: ["$.path: message", …]}: read it and call again. `input` defaults to {}.
- Only a tool that ran and failed (an authored tool that raised, exited non-zero, hit its time limit, or returned nothing or a value its output schema rejects: `tool-failed`), or a gate that refuses it (its runtime missing here, no `execute` grant), is an error.

## Promotion
Once this session has read `~/tools/<name>` or called `<name>`, that callable is also listed as an MCP tool of its own on session-bound endpoints (stdio, `/mcp/sessions/{id}`, handshake-era `/mcp`), with the same contract and routed through call; handshake-era clients get `notifications/tools/list_changed`. It is derived from the session's log, so it survives restarts.""",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "tool": {"type": "string", "minLength": 1, "description": "The tool name, as listed under ~/tools/."},
            "input": {"type": "object", "description": "The tool's input, matching its contract."},
        },
        "required": ["tool"],
    },
)

DELEGATE = VerbSpec(
    name="delegate",
    title="Delegate",
    open_world=True,
    description="""Spawn a child run to do work for you; its result is this call's answer. Pass exactly one of:
- `brief` (a model child): markdown that becomes the child's first message verbatim. The child starts fresh and sees nothing of this conversation: give it the goal, the background and the data. Optional: `prompt` (an anonymous worker's system prompt) or `agentId` (another of your agents), `tools` (narrow its toolset), `output` (a JSON schema, root type object: the child must return a matching result), `await: false` (detached: it runs in the background and you get only its ids).
- `script` (a script child): Python defining `def main(ctx):`, run durably in a sandbox; `ctx` calls tools, delegates model children (also in parallel), plans, logs, sleeps, waits for signals and activity, and continues as a fresh run; `input` becomes `ctx.input`. Always awaited.
Answers {status, runId, sessionId, output | error{code, message}}. Children delegated in one reply run at the same time. Full contract (the ctx API, limits, error codes): read ~/tools/delegate.""",
    details="""## Model child (`brief`)
- The brief is the first message of a new child session, verbatim. (The reference's rescue rules also start a model child from `input` — any JSON value, sent as a fenced JSON block unless it is a string — which wins over `brief`, or, with neither, from a bare `prompt`.)
- It runs as you (your model, memory and grants) unless `agentId` names another agent of your account, or `prompt` makes it an anonymous worker with that system prompt on your model and memory; `prompt` and `agentId` exclude each other.
- `tools` narrows the child's callables to the listed ones its agent has (and, when a server-run turn or a script delegates, that it may use itself): delegation never widens authority.
- `output` (a JSON schema in the authored-tool subset, root type "object") makes the child owe a typed result: it gets a `return_result` tool with that schema; a result that does not validate goes back to it with the errors, and after three failures the child fails with `output-schema`. Without `output`, the result is {text}: the child's final message.
- An MCP client's call stays open until the child ends, with progress notifications; cancelling it cancels the child's whole tree. A server-run turn parks instead, and resumes with the result. An MCP client that declares the Tasks extension (`io.modelcontextprotocol/tasks`) gets a task handle instead — the child's run id — and polls `tasks/get`, or stops it with `tasks/cancel`.
- A child session is an MCP endpoint too (`/mcp/sessions/<session id>`): an outside client can work the task and deliver its result through `return_result`.
- A child whose agent runs on the `sampling` provider (the MCP client's own model) needs a request that can carry its model requests; when this one cannot, delegate refuses it and says why.

## Detached child (`await: false`)
A new conversation of yours starts in the background with the brief as its first message (at most 64 KiB). The answer comes at once — {status: "detached", sessionId, runId, title} — and its outcome never comes back to you (read `thread:<id>` or `run:<id>` to follow it). `agentId`, `output` and `tools` are refused.

## Script child (`script`)
A module in a Python subset (run by the Monty interpreter) defining `def main(ctx):` once, synchronous, with one parameter; its return value (JSON data; None is null) is the result. Refused before it runs: over 256 KiB, a syntax error, `import` anywhere, calls of open, eval, exec, compile, __import__, input, breakpoint or globals, any use of random, time, datetime, uuid, secrets, os or sys, and names starting `_harness`. `brief` beside `script`, and `await: false`, are refused.
Everything outside the script goes through `ctx`, and each call is journaled, so after a restart — or when the script resumes after waiting for model children — it replays to where it stopped without repeating an effect; a tool call that a crash cut short is answered `interrupted`, never run twice.
- `ctx.input`: your `input` (null when omitted). `ctx.run_id`: the script's run id.
- `ctx.call(tool, input=None)`: read, write, your granted callables and your authored tools (`input` a dict or None); returns the tool's structured result.
- `ctx.delegate(spec)` (also `ctx.agent(spec)`): a model child, spec as for delegate (brief, title, prompt, agentId, tools, output); returns its output: the typed payload or {text}.
- `ctx.parallel(thunks)`: zero-argument functions whose model children all run at the same time; returns their results in order, raising the first failure. `ctx.parallel_settled(thunks)`: the same without raising — a list of {ok: True, value} or {ok: False, error: {code, message}}. `ctx.delegate_all(specs)`: ctx.parallel over ctx.delegate.
- `ctx.plan(steps, title=None)`: the run's plan (steps: labels or {label, status?}; ids step-1, step-2, …). `ctx.step(label, fn)`: runs `fn()`, marking the plan step of that label running, then done or failed; model children spawned inside carry that step.
- `ctx.now()`: milliseconds since the epoch (the same on replay). `ctx.log(level, message, data=None)`. `ctx.minutes(n)`, `ctx.hours(n)`: milliseconds.
- `ctx.sleep(ms)`: waits; from 60 s up the script is parked durably (nothing held, it survives restarts) and resumes once the time has come.
- `ctx.wait_for_event(signal=None, timeout_ms=None, match=None, label=None)`: parks until a delivery, returning {source: "signal" | "trigger" | "activity", signal?, payload?}, or None once `timeout_ms` has passed. `signal` accepts only that signal; no signal and no match accepts any signal; `match` {eventType?, resource?, author?} accepts activity on the hypermedia node (comment, doc-update, capability, contact, citation) whose every named field matches, any version of `resource` unless it names one. Signals come from `write run:<id>` {signal, payload?}, `mcp-harness runs signal RUN SIGNAL [--payload JSON]` and `wake` triggers; one sent while the script is not waiting reaches nobody. Inside `ctx.parallel`, the thunks' sleeps and waits run side by side, as model children do.
- `ctx.continue_as_new(input)`: ends this run (it succeeds with {continued: true, continuedAsRunId}) and starts a fresh run of the same script with `input` as its `ctx.input` and an empty journal, in this run's place: only the last run of the chain answers you. Not inside `ctx.parallel`; it never returns.
A failed ctx call raises `RuntimeError("<code>: <message>")`, which the script may catch; uncaught, the script fails with that code. Codes: `unknown-tool`, `invalid-input`, `tool-error`, `interrupted`, `canceled` (a model child was canceled), or a failed model child's own code.
Limits: about 2 s of pure compute between ctx calls (`fuel-exhausted`), 64 MiB of memory, recursion depth 200, a journal of 5,000 entries or 8 MiB (`journal-cap`); any other uncaught failure is `workflow-error`. A script child has no session: its answer's `sessionId` is null, and `run:<id>` shows its status, plan and source.

## Limits
- A child sits at most 3 levels below whoever started the tree.
- A run that already has 10 children spawns no more model children; an MCP session runs at most 10 model children at once, and a session that already started 10 sessions starts no detached child.
- Children delegated in one model reply all start at once; a server-run parent waits until every one has ended.

## Answer
{status: "succeeded" | "failed" | "canceled" | "detached", runId, sessionId (null for a script child), output (on success) or error {code, message} (on failure)}. Codes a parent sees: `output-schema`, `provider-error` (a model provider's failure), `config-error`, `executor-error`, `no-executor`, `run-failed`, and a script's codes above. A spawn that breaks a rule is refused with the reason.""",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string", "description": "Short label for the child, shown in listings and progress."},
            "brief": {"type": "string", "description": "Model child: its first message, verbatim markdown."},
            "script": {"type": "string", "description": "Script child: Python defining `def main(ctx):`."},
            "input": {**ANY_JSON, "description": "Script child: the JSON value read as `ctx.input`."},
            "prompt": {
                "type": "string",
                "description": "Model child: system prompt of an anonymous worker on your model; not with agentId.",
            },
            "agentId": {"type": "string", "description": "Model child: run as another of your agents."},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Model child: only these tools (within what its agent has).",
            },
            "output": {
                "type": "object",
                "description": 'Model child: JSON schema of the required result (root type "object").',
            },
            "await": {"type": "boolean", "description": "Default true. false: detached (model child only)."},
        },
    },
    output_schema={
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["succeeded", "failed", "canceled", "detached"]},
            "sessionId": {"type": ["string", "null"], "description": "The child's session; null for a script child."},
            "runId": {"type": "string"},
            "output": {
                **ANY_JSON,
                "description": "On success: the typed payload, {text}, or the script's return value.",
            },
            "error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
        },
    },
)

PLAN = VerbSpec(
    name="plan",
    title="Plan",
    idempotent=True,
    description="""Set this conversation's visible checklist. Send the full list each time; it replaces the previous plan. For a task of 3 or more steps, declare them all pending, then mark each running when you start it and done, failed or skipped when it ends. A new task gets a fresh plan with new ids, without the finished steps. Readable as harness://plan. Limits: 100 steps, labels and title 200 characters, unique ids; input over a limit is refused, not cut. Full contract: read ~/tools/plan.""",
    details="""## Shape and limits
- Steps are {id, label, status}: `id` a non-empty string unique in the plan, kept across updates; `label` 1 to 200 characters; `status` one of pending, running, done, failed, skipped. No other fields: marks the runtime sets (`resolvedBy`) cannot be sent. `title` is at most 200 characters; at most 100 steps.
- Input that breaks a rule is refused whole, naming the field (`$.steps[3].label`, or the repeated ids); a refused plan changes nothing. Nothing is cut or renamed.
- Each call replaces the whole plan; plan calls are not logged as transcript events. Result: {ok, steps (the count)}.

## How it is used
- Children that a server-run turn delegates while exactly one step is running are attached to that step; when all of them succeed, the runtime marks it done (`resolvedBy: "runtime"`).
- A server-run turn sees the plan as a `<plan_state>` block and is held to it: a run that stops with steps unfinished gets up to three continuations, then ends with `unmetObligations`.
- `read harness://plan` (or the resource) returns {title?, steps, ownerRunId?, settledAt?}; `steps: []` when there is no plan. A script child's `ctx.plan` sets its run's own plan instead.""",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string", "maxLength": 200, "description": "Optional one-line name of the task."},
            "steps": {
                "type": "array",
                "maxItems": 100,
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "id": {
                            "type": "string",
                            "minLength": 1,
                            "description": 'Stable id (e.g. "s1"), unique in the plan, kept across updates.',
                        },
                        "label": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 200,
                            "description": "Short, outcome-oriented description of the step.",
                        },
                        "status": {"type": "string", "enum": ["pending", "running", "done", "failed", "skipped"]},
                    },
                    "required": ["id", "label", "status"],
                },
            },
        },
        "required": ["steps"],
    },
)

# -- the builtin callables' contracts live with them, in mcp_harness/callables/ (registry.py lists them) ----------

RETURN_RESULT_DESCRIPTION = (
    "Deliver the final structured result of this delegated task. Call this exactly once when the task is complete; "
    "the payload must match the required schema. This ends your task."
)

VERBS: dict[str, VerbSpec] = {spec.name: spec for spec in (READ, WRITE, CALL, DELEGATE, PLAN)}
"""The five verbs, in listing order."""


@cache
def _validator(name: str) -> Draft202012Validator:
    """A verb's input validator, built on its first call: jsonschema (and its referencing stack) costs a stdio
    server's cold start more than anything else the harness imports, and `tools/list` never needs it."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(VERBS[name].input_schema)


@cache
def _certainly_valid(name: str) -> Check:
    return compile_check(VERBS[name].input_schema)


def input_errors(name: str, arguments: dict[str, Any]) -> list[str]:
    """Schema violations of a verb's input as `$.path: message` lines (empty when valid)."""
    if depth_exceeds(arguments, MAX_INPUT_DEPTH):
        return [f"$: the input nests deeper than {MAX_INPUT_DEPTH} levels of objects and arrays (the limit)"]
    broken = surrogate_paths(arguments)
    if broken:
        # JSON can escape a lone surrogate (\ud800) that no UTF-8 text, file or log can hold.
        return [f"{path}: holds a lone surrogate, which is not valid Unicode; send valid UTF-8 text" for path in broken]
    if _certainly_valid(name)(arguments):
        return []
    out: list[str] = []
    for err in sorted(_validator(name).iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        out.append(f"{path}: {err.message}")
    return out
