"""The single source of the verbs' names, descriptions, schemas and annotations.

Input schemas follow the reference harness's contracts (seed `tool-registry.ts`, the verb era) so a model trained
against either sees the same surface. Descriptions say what this server does; a form that a later build adds is
not promised here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from mcp_harness.jsondepth import MAX_INPUT_DEPTH, depth_exceeds


@dataclass(frozen=True, kw_only=True)
class VerbSpec:
    """One verb's contract."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
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
        parts = [f"# {self.name}", "", self.description, "", "## Input schema", "```json"]
        parts += [json.dumps(self.input_schema, indent=2, ensure_ascii=False), "```"]
        if self.output_schema is not None:
            parts += ["", "## Output schema", "```json", json.dumps(self.output_schema, indent=2), "```"]
        return "\n".join(parts)


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The MCP Tasks extension (SEP-2663): a client declaring it may get `delegate` as a task handle."""


READ = VerbSpec(
    name="read",
    title="Read",
    read_only=True,
    idempotent=True,
    description="""Read anything you can address. One verb for your whole world; the address shape picks the source:
- `~/memory/<path>` — a file in your persistent memory. A directory path (or `~/memory/`) lists entries with sizes.
- `~/tools/<name>` — a tool contract: full description plus input/output schemas. `~/tools/` lists every tool you can call.
- `~/self` — everything about you: your definition (model, system prompt, grants), a memory summary, and how many conversations you have.
- `thread:<id>` — a conversation transcript of yours. `thread:` alone lists your account's conversations, newest first; options {query} searches titles and message text, {agentId} filters to one agent, {limit} (an integer from 1 to 100) caps results.
- `run:<id>` — a run's public record: status, what it waits on, usage, plan, children, error and output.
- `harness://plan` — this conversation's checklist, as set with the plan verb.
- `hm://<account>/<path>` — a signed hypermedia document as markdown with `<!-- id:… -->` block markers (format json gives the block tree). `?v=<version>` reads an older version; `#<block>` or `#<block>[start:end]` one block or part of its text; `hm://<author>/<tsid>` a comment. Views: `/:directory` (child documents), `/:attributes` (metadata only), `/:profile` (an account's profile), `/:comments`.
- `https://…` — a public web page as markdown (main content only). A Seed site's document is read as that document. Options {raw: true} returns the body as is; {offset, length} page through long output.
The `harness://…` resource URIs (harness://memory/<path>, harness://tools/<name>, harness://self) are accepted too.
Directory listings return {entries: [{path, type, size}]}; memory file reads return {content}. Prefer reading exactly what you need; directory listings are cheap, whole trees are not.""",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "address": {
                "type": "string",
                "minLength": 1,
                "description": "What to read: ~/memory/…, ~/tools/…, ~/self, thread: or thread:<id>, run:<id>, harness://plan, hm://…, https://….",
            },
            "format": {
                "type": "string",
                "enum": ["markdown", "json"],
                "description": "Output format where supported. Defaults to markdown.",
            },
            "options": {
                "type": "object",
                "description": "Source-specific options: thread listing {query, agentId, limit}; web pages {raw, offset, length}.",
            },
        },
        "required": ["address"],
    },
)

WRITE = VerbSpec(
    name="write",
    title="Write",
    destructive=True,
    description="""Write anything you can address. The address shape picks the destination:
- `~/memory/<path>` — write `content` to a memory file (parent folders are created automatically; writing an existing file replaces its whole content — there is no append). Options: {delete: true} removes a file or directory.
- `~/tools/<name>` — author a tool of your own (a lambda): `content` is JSON {description, input?, output?, source, runtime?, summary?} (or pass it as options.tool). `source` defines `main(input)` (Python, runtime "python") or a default export (TypeScript); it runs in the execute sandbox with your memory at /workspace and returns the result. `input`/`output` are JSON schemas (type, properties, required, additionalProperties, enum, min/max…, items). Writing an existing name replaces it; {delete: true} removes it. Call it by name with the call verb.
- `hm://<account>/<path>` — publish a signed hypermedia document from markdown `content` (needs the publish grant and a signing identity; the account picks it, or options.signer by name or public key). Default action creates (a name is required: options.name, options.metadata.name, or a `name:` frontmatter line; a nested path needs its parent). options.action: "update" (content replaces the body, keeping the ids of blocks that survive; no content changes metadata only), "comment" (options.target, options.replyTo), "move" (options.toPath), "redirect" (options.toUrl), "delete", "fork" (options.fromUrl). options.fromPath publishes a memory markdown file. Every hm:// link is checked first (options.skipLinkCheck to link to something not yet published). dryRun: true validates without publishing. Extra fields never go as loose option keys.
Writes are atomic: a reader sees the old file or the new one, never a mix. Unrecognized option keys are refused, not ignored.""",
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
                "description": "The content to write: raw text for memory files; a JSON tool document for ~/tools/<name>; markdown for hm://.",
            },
            "options": {
                "type": "object",
                "description": "Destination-specific options; read ~/tools/write for the full contract per address form.",
            },
            "dryRun": {
                "type": "boolean",
                "description": "For hm:// writes: validate and echo what would be published without publishing anything.",
            },
        },
        "required": ["address"],
    },
)

CALL = VerbSpec(
    name="call",
    title="Call",
    open_world=True,
    description="""Invoke a tool by name with a JSON input. Your available tools are listed with one-line summaries under `~/tools/`; read `~/tools/<name>` for a full contract.
Calling a tool with missing or invalid input does not fail: the result is the tool contract itself — read it and call again correctly. Do not guess elaborate inputs for a tool you have not expanded.""",
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
    description="""Spawn a child run to do work for you. Two kinds of child, one verb:
- A **model child** (default): pass `brief` — human-readable markdown that becomes the child conversation's first message VERBATIM. Write a real briefing: goal, all needed background, expectations, data in fenced blocks. The child is a fresh context and never sees this conversation; it does share your persistent memory when it runs as you. Pass `prompt` for an anonymous worker persona or `agentId` to run one of your other agents; pass `tools` only to narrow its toolset. Declare `output` (a JSON schema, root type "object") to get a validated structured result; otherwise you get its final text.
- A **script child**: pass `script` — a Python module (the Monty subset: no imports, no classes with bases) defining `def main(ctx):`, whose return value (JSON data; None → null) is the result. Everything outside goes through `ctx`, and each call is journaled so the script resumes exactly after a restart or while it waits for a child: `ctx.input` (your `input`), `ctx.run_id`, `ctx.call(tool, input)` (read, write, your callables and lambdas), `ctx.delegate(spec)` (a model child; spec as for delegate, returns its output: the typed payload or {text}), `ctx.now()` (ms since the epoch), `ctx.log(level, message, data=None)`, `ctx.plan(steps, title=None)`, `ctx.step(label, fn)` (runs `fn()`, marking the plan step of that label running, then done or failed; children spawned inside carry that step), `ctx.parallel(thunks)` (zero-argument functions whose model children all run at the same time; returns their results in order, raises the first failure), `ctx.parallel_settled(thunks)` (the same, never raising: a list of {ok, value} or {ok: false, error{code, message}}), `ctx.delegate_all(specs)` (ctx.parallel over ctx.delegate). A failed ctx call raises `RuntimeError("<code>: <message>")` (codes: unknown-tool, invalid-input, tool-error, canceled, a child's own code); uncaught, it fails the script with that code. Scripts are always awaited; about 2 s of pure compute between ctx calls (fuel) and 64 MiB of memory.
Independent children must be spawned together, in one reply. Pass `await: false` only for fire-and-forget work whose outcome you do not need.""",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {
                "type": "string",
                "description": "Short label for the child, shown in the thread list and progress card.",
            },
            "brief": {
                "type": "string",
                "description": "Model child: the task brief as human-readable markdown; becomes the child's first "
                "message verbatim. Provide exactly one of brief or script.",
            },
            "script": {
                "type": "string",
                "description": "Script child: a self-contained Python module defining `def main(ctx):` (see above). "
                "Provide exactly one of brief or script.",
            },
            "input": {"description": "Script child only: JSON value the script reads as `ctx.input`."},
            "prompt": {
                "type": "string",
                "description": "Model child: optional system prompt for an anonymous worker using your model. Omit "
                "to run the child as yourself; provide at most one of prompt or agentId.",
            },
            "agentId": {"type": "string", "description": "Model child: run under another of your agents by id."},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Model child: restrict the child to these tools (intersected with what its agent has).",
            },
            "output": {
                "type": "object",
                "description": 'Model child: JSON schema for the required result (root type "object"). The child '
                "delivers it via return_result; validation errors bounce back for self-correction.",
            },
            "await": {
                "type": "boolean",
                "description": "Default true: your turn parks until the child resolves and you receive its result. "
                "false: detached — the child runs in the background and you never receive its outcome.",
            },
        },
        "required": [],
    },
    output_schema={
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["succeeded", "failed", "canceled", "detached"]},
            "sessionId": {"type": ["string", "null"], "description": "The child's session; null for a script child."},
            "runId": {"type": "string"},
            "output": {
                "description": "The validated result payload, {text} when no output schema was declared, or the "
                "script's return value."
            },
            "error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}}},
        },
    },
)

PLAN = VerbSpec(
    name="plan",
    title="Plan",
    idempotent=True,
    description="""Maintain the visible plan for the current task. Call this when starting any task with 3 or more distinct steps (declare them all as pending, then mark the first running), and again whenever a step's status changes: running when you begin it, done when finished, failed if it cannot complete, skipped if no longer needed. Keep step labels short and outcome-oriented. Send the full current list each time; it replaces the previous plan. Each task gets its own checklist: a plan whose every step has finished is history — when the user asks for something new, publish a fresh plan with only the new task's steps (new ids), never re-list finished work. The checklist is readable as the resource harness://plan. Limits (100 steps, 200-character labels) are refused when exceeded, never cut.""",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string", "maxLength": 200, "description": "Optional one-line name for the overall task."},
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
                            "description": 'Stable id for the step (e.g. "s1"), unique in the plan, kept across updates.',
                        },
                        "label": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": 200,
                            "description": "Short description of the step.",
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

# -- callable tools: reached through `call` (and promoted to real MCP tools once touched) ---------------------

SEARCH = VerbSpec(
    name="search",
    title="Search",
    read_only=True,
    open_world=True,
    description="Search Seed hypermedia content: document titles, contacts, and optionally document bodies and comments. Returns ranked results with hm:// URLs you can read.",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "The search query. Supports phrases and wildcards.",
            },
            "accountUid": {
                "type": "string",
                "description": "Optional account UID to scope search to a single account.",
            },
            "includeBody": {
                "type": "boolean",
                "description": "Set true to search document bodies and comments in addition to titles and contacts.",
            },
            "contextSize": {
                "type": "integer",
                "minimum": 0,
                "maximum": 512,
                "description": "Optional match context size in runes. Defaults to 48.",
            },
            "searchType": {
                "type": "string",
                "enum": ["keyword", "semantic", "hybrid"],
                "description": "Search ranking mode. Defaults to hybrid.",
            },
            "pageSize": {"type": "integer", "minimum": 1, "description": "Maximum number of results to return."},
        },
        "required": ["query"],
    },
)

WEB_SEARCH = VerbSpec(
    name="web_search",
    title="Web Search",
    read_only=True,
    open_world=True,
    description="Search the public web. Returns ranked results with titles, URLs, and snippets; read a result with `read` on its URL. Use the news category for recent events.",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "The web search query."},
            "count": {
                "type": "integer",
                "minimum": 1,
                "description": "Maximum number of results to return. Default 10, max 25.",
            },
            "category": {
                "type": "string",
                "enum": ["general", "news"],
                "description": "Result category. Use news for recent events, general otherwise. Defaults to general.",
            },
            "timeRange": {
                "type": "string",
                "enum": ["day", "week", "month", "year"],
                "description": "Optional recency filter for time-sensitive queries.",
            },
            "language": {"type": "string", "description": "Optional language code such as en. Defaults to en."},
        },
        "required": ["query"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description": "One-line summary of the search outcome."},
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "url": {"type": "string"},
                        "snippet": {"type": "string"},
                        "engine": {"type": "string", "description": "Upstream engine that produced the result."},
                    },
                },
            },
            "partial": {
                "type": "boolean",
                "description": "True when some engines were unavailable and coverage may be partial.",
            },
            "markdown": {"type": "string", "description": "Human-readable rendering of the results."},
        },
    },
)

EXECUTE = VerbSpec(
    name="execute",
    title="Execute Code",
    destructive=True,
    open_world=True,
    description="Run TypeScript, Python, or shell code in an isolated sandbox with your persistent memory mounted at /workspace, which is also the working directory. Files your code reads and writes under /workspace are the same files as your ~/memory addresses, so use this to process, transform, analyze, or generate memory files — parse data, convert formats, run computations, and save results. Each call runs in a fresh sandbox (a bubblewrap namespace: read-only system directories, a private /tmp, no other files of the host): no state (variables, processes, /tmp) survives between calls, so persist anything important as files under /workspace. Network access is off unless the server's owner turned it on, and CPU time, memory, processes and file sizes are limited. Output returns stdout, stderr, the exit code, and which memory files changed.",
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "runtime": {
                "type": "string",
                "enum": ["ts", "python", "shell"],
                "description": 'How to run the code: "ts" runs TypeScript, "python" runs it with the system python interpreter, "shell" runs it with sh. Read ~/tools/execute for the runtimes this server actually offers — the list there is authoritative.',
            },
            "code": {"type": "string", "minLength": 1, "description": "The code to execute."},
            "timeout_secs": {
                "type": "integer",
                "minimum": 1,
                "description": "Optional timeout override in seconds, at most 300. Defaults to the server limit (typically 60).",
            },
        },
        "required": ["runtime", "code"],
    },
    output_schema={
        "type": "object",
        "properties": {
            "summary": {"type": "string"},
            "exitCode": {"type": "integer"},
            "success": {"type": "boolean"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "truncated": {"type": "boolean", "description": "True when stdout/stderr was cut to the size limit."},
            "durationMs": {"type": "integer"},
            "changedFiles": {
                "type": "array",
                "description": "Memory files added, modified, or removed by the execution.",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "change": {"type": "string", "enum": ["added", "modified", "removed"]},
                    },
                },
            },
        },
    },
)

CALLABLES: dict[str, VerbSpec] = {spec.name: spec for spec in (SEARCH, WEB_SEARCH, EXECUTE)}
"""The builtin callable tools, in listing order (HARNESS §4: materialized per agent as tool documents)."""

CALLABLE_ALIASES = {"execute_code": "execute"}
"""Legacy names still found in stored definitions (`normalizeSeedToolName`)."""

RESERVED_TOOL_NAMES = frozenset({*CALLABLES, "navigate", "read", "write", "call", "delegate", "plan", "status"}) | {
    "return_result"
}


def callable_alias(name: str) -> str:
    return CALLABLE_ALIASES.get(name, name)


def narrowed(spec: VerbSpec, runtimes: tuple[str, ...]) -> VerbSpec:
    """`execute`'s contract with its runtime enum cut to what this host offers (unchanged if none or all are)."""
    if spec.name != "execute":
        return spec
    declared = spec.input_schema["properties"]["runtime"]["enum"]
    offered = [r for r in declared if r in runtimes]
    if not offered or len(offered) == len(declared):
        return spec
    schema = json.loads(json.dumps(spec.input_schema))
    schema["properties"]["runtime"]["enum"] = offered
    return dataclasses.replace(spec, input_schema=schema)


RETURN_RESULT_DESCRIPTION = (
    "Deliver the final structured result of this delegated task. Call this exactly once when the task is complete; "
    "the payload must match the required schema. This ends your task."
)

VERBS: dict[str, VerbSpec] = {spec.name: spec for spec in (READ, WRITE, CALL, DELEGATE, PLAN)}
"""The five verbs, in listing order."""

VALIDATORS: dict[str, Draft202012Validator] = {name: Draft202012Validator(s.input_schema) for name, s in VERBS.items()}


def input_errors(name: str, arguments: dict[str, Any]) -> list[str]:
    """Schema violations of a verb's input as `$.path: message` lines (empty when valid)."""
    if depth_exceeds(arguments, MAX_INPUT_DEPTH):
        return [f"$: the input nests deeper than {MAX_INPUT_DEPTH} levels of objects and arrays (the limit)"]
    out: list[str] = []
    for err in sorted(VALIDATORS[name].iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        out.append(f"{path}: {err.message}")
    return out
