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

from mcp_harness.jsondepth import MAX_INPUT_DEPTH, depth_exceeds, surrogate_paths


@dataclass(frozen=True, kw_only=True)
class VerbSpec:
    """One verb's contract, at two levels.

    `description` is what `tools/list` (and a server-run turn) shows: a line per address form or option, ending with
    where the full contract is. `details` is the rest of that contract — every form's options, results, limits and
    error codes — shown only by `read ~/tools/<name>` (`contract_markdown`), so the always-sent text stays small.
    """

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    details: str | None = None
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
        """The full contract: the description, the details, then the schemas."""
        parts = [f"# {self.name}", "", self.description]
        if self.details:
            parts += ["", self.details.strip()]
        parts += ["", "## Input schema", "```json", json.dumps(self.input_schema, indent=2, ensure_ascii=False), "```"]
        if self.output_schema is not None:
            parts += ["", "## Output schema", "```json", json.dumps(self.output_schema, indent=2), "```"]
        return "\n".join(parts)


TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The MCP Tasks extension (SEP-2663): a client declaring it may get `delegate` as a task handle."""

ANY_JSON: dict[str, Any] = {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean", "null")]}
"""Any JSON value, with every branch typed: a six-member `type` array is a union that Ajv's strict mode refuses
(`strictTypes`: only `[T, "null"]` is allowed without `allowUnionTypes`), and an untyped property gives a client's
form builder nothing to dispatch on."""

MEMORY_PATH_RULES = (
    "Paths: `\\` counts as `/`, and empty and `.` segments are dropped. Refused: a NUL or other control character, "
    "`..`, more than 16 segments, more than 512 bytes in all or 255 in one name, and names starting "
    "`.mcp-harness-tmp-` (the harness's own temp files). Symlinks are never followed: a path through one reads as "
    "not found and is refused for writing."
)

READ = VerbSpec(
    name="read",
    title="Read",
    read_only=True,
    idempotent=True,
    open_world=True,
    description="""Read anything you can address. The address picks the source:
- `~/memory/<path>`: a file of your persistent memory ({content}; options offset, length); a directory (`~/memory/`, or a path ending in `/`) lists one level ({entries}; options cursor, limit).
- `~/tools/`: the verbs and the tools you can call; `~/tools/<name>`: one tool's full contract.
- `~/self`: your definition, grants, signing identities and a memory summary.
- `thread:`: your account's conversations, newest first (options query, agentId, limit 1-100); `thread:<id>`: one transcript.
- `run:<id>`: a run's status, wait, usage, plan, children, error and output.
- `harness://plan`: this conversation's checklist.
- `hm://<account>/<path>`: a signed document as markdown with block ids; `?v=<version>`, `#<block>`, views `/:directory`, `/:attributes`, `/:profile`, `/:comments`; `hm://<author>/<tsid>` is a comment.
- `https://...`: a web page as markdown, main content only (options raw, offset, length); a Seed site's URL reads as its document.
`format: "json"` gives the structured form. Full contract (every form's options, results, limits): read ~/tools/read.""",
    details=f"""## `~/memory/<path>` (also `harness://memory/<path>`)
- A file: the text result is the file itself; the structured result is {{path, size, updatedAt, mimeType?, encoding: "utf8", content, totalChars, offset, length}}. A page holds at most 200 KiB of UTF-8: `options.offset` (an integer ≥ 0) and `options.length` (an integer ≥ 1) pick a window, in characters; when more remains, the result says so and gives `nextOffset`. Over MCP a page over 16 KiB travels once, in the text block only (`contentInText: true` in the structured result). A binary file (a NUL byte, or not UTF-8) gives its metadata with `encoding: "binary"` and no content; work on it with `call execute`.
- A directory — `~/memory/`, a path ending in `/`, or the bare name of a directory — lists one level in path order, a page of at most `options.limit` entries (1 to 500, default 100): {{path, entries: [{{path, type: "file" | "dir", size, updatedAt, mimeType?, entryCount?}}], totalEntries, totalBytes (or pageBytes for a partial page), nextCursor?, remaining?}}; pass `options.cursor` (the `nextCursor`) for the next page. Symlinks and special files are not listed. A name no address can carry (not UTF-8, a control character, a backslash) is listed escaped, with `addressable: false`.
- File options on a directory, listing options on a file, and any other option keys are refused.
- {MEMORY_PATH_RULES}

## `~/tools/` and `~/tools/<name>` (also `harness://tools/<name>`)
- `~/tools/` lists the five verbs and the callable tools you may use — granted builtins this host offers, and the tools you authored — with one-line summaries: {{verbs, tools, markdown}}.
- `~/tools/<name>`: a verb's full contract (this text and its schemas), or a callable's: description, input and output schemas, its CID, and for an authored tool its runtime and source. A name you cannot call reads like one that does not exist: you get the listing.
- Reading a callable's contract (or calling it) makes it an MCP tool of its own in this session on session-bound endpoints (see ~/tools/call).

## `~/self` (also `harness://self`)
{{agentId, name, model, modelProvider, reasoningLevel?, systemPrompt, grants: {{callableTools, publish}}, unavailableGrants?: [{{tool, reason}}] (granted tools this host cannot run, and why), signingKeys?: [{{name, label, accountId}}], metadata?, triggers, memory: {{totalFiles, topLevel}}, sessionCount, guidance}}. Your definition is edited by your user, not by you. It takes no options.

## `thread:` and `thread:<id>`
- `thread:` lists your account's conversations (a token scoped to one agent: that agent's), newest first: {{threads: [{{thread, title?, description?, agent, agentId, status, parentThread?, updatedAt, snippet?}}]}}. Options: `query` (a string matched against titles and message text; matches carry a snippet), `agentId` (one agent's conversations), `limit` (an integer from 1 to 100, default 25; any other value is refused). Other option keys are refused.
- `thread:<id>`: the conversation's last 200 events as a transcript (kept to its last 262,144 characters), with its child sessions and the runs behind them; `format: "json"` adds the events themselves. A conversation you may not see reads as not found.

## `run:<id>`
A run's public record — id, kind, status, title, what it waits on (`wait`), usage, plan, children ({{id, status, title, sessionId}}), error, output, unmetObligations — and a script's source as `sourceText`. A run you may not see reads as not found.

## `harness://plan`
This conversation's checklist as set with the plan verb: {{title?, steps: [{{id, label, status, resolvedBy?}}], ownerRunId?, settledAt?}}; `steps: []` when there is none.

## `hm://<account>/<path>`
A signed document on this server's embedded hypermedia node.
- The text result is markdown in Seed's dialect: frontmatter and `<!-- id:… -->` block markers, so what you read can be edited and written back with its block ids intact. Embeds are resolved two levels deep; the rendering is kept to 262,144 characters (then `truncated: true`). `format: "json"` returns the block tree instead.
- `?v=<version>` reads an older version; `#<block>` one block; `#<block>[start:end]` part of its text (code-point offsets).
- `hm://<author>/<tsid>` reads a comment.
- Views: `/:directory` (child documents), `/:attributes` (metadata only), `/:profile` (an account's profile), `/:comments` (the document's comments).
- Every result carries `requestedId` as asked, the canonical `id` and the `version` read; after a redirect, also `redirectedFrom`.

## `https://…` and `http://…`
- Fetches the page through the server's guarded client: every redirect hop is checked again, and loopback, private and link-local addresses are refused unless the owner allowed the host. At most `[web] max_page_bytes` (default 5 MiB) is downloaded; the rest is cut, with a notice.
- Result: {{url (after redirects), title, contentType, charset, markdown}}. HTML is cut to its main content (`role="main"`, else `<main>`, else the largest `<article>`, else `<body>`; navigation, headers, footers, scripts, styles, forms and boilerplate dropped) and converted to markdown with headings, lists, absolute links, fenced code and tables. Text types (plain, markdown, JSON, XML, YAML, …) come back as they are. A binary type gives its metadata and no content: download it with `write ~/memory/<path>` and `options.fromUrl`.
- Options: `raw: true` returns the text body verbatim (no conversion, no Seed lookup); `offset` (an integer ≥ 0) and `length` (an integer ≥ 1) select a window of the text, in characters. A read returns at most 200 KiB; when more remains it says so and gives `nextOffset`. Other option keys are refused.
- Hypermedia first: an `https://` URL that names a Seed document (a gateway URL `…/hm/<account>/<path>`, or a site that answers `OPTIONS` with `x-hypermedia-id`) is read as that document; only an explicit "not hypermedia" or a 404 falls through to the page reader.
- HTTP 404 and 410 read as not found; other HTTP errors, as upstream errors.""",
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
    description="""Write anything you can address. The address picks the destination:
- `~/memory/<path>`: replace the whole file with `content`, atomically (parent folders are created; there is no append). options {delete: true} removes a file or directory; {fromUrl: "<url>"} downloads the URL into the path instead.
- `~/tools/<name>`: author a tool (lambda) from JSON `content` {description, input?, output?, source, runtime?, summary?}; `source` defines `main(input)` (runtime "python") or a default export (TypeScript), run in the execute sandbox by the call verb. {delete: true} removes it.
- `hm://<account>/<path>`: publish a signed document from markdown `content` (needs the publish grant and a signing identity). options.action: document (default: create), update, comment, move, redirect, delete, fork; options.fromPath publishes a memory file; `dryRun: true` checks without publishing.
Unknown option keys are refused. Full contract (each form's options, results, limits): read ~/tools/write.""",
    details=f"""## `~/memory/<path>`
- `content` (a string, stored as UTF-8) replaces the whole file: it is written to a temp file, synced and renamed into place, so a reader sees the old file or the new one, never a mix. Parent folders are created. There is no append: read, change, write back. Writing onto a directory is refused. Result: {{path, type, size, updatedAt, mimeType?}}.
- `options: {{delete: true}}` removes a file or a whole directory tree (`deleted: false` when nothing was there); `delete` must be a boolean.
- `options: {{fromUrl: "<http:// or https:// URL>"}}` downloads the URL into memory instead of `content` (it takes no content and no other option), through the same guarded client as `read https://…`, and stores it atomically. An address naming a directory (a path ending in `/`, or `~/memory/`, which stores under `downloads/`) takes the URL's last path segment as the file name; a name without an extension gets one from the content type. A body over `[web] max_download_bytes` (default 50 MiB) is refused, and so is an HTTP error status. Result: {{path, size, mimeType, finalUrl, contentType}}.
- {MEMORY_PATH_RULES}
- Other option keys are refused by name.

## `~/tools/<name>`
- `content` is a JSON tool document (or pass the object as `options.tool`): {{description (required, at most 16 KiB), source (required, at most 256 KiB), runtime?, input?, output?, summary?}}; no other fields.
- `runtime`: "python" calls the source's top-level `main(input)` (sync or async) with the system Python; "typescript" (or "ts") calls its default export. Left out, it is python (typescript on a host that runs only TypeScript); any other value is refused. The tool runs in the execute sandbox with your memory at /workspace; its return value is the result.
- `input` and `output` are JSON schemas in a subset — type, properties, required, additionalProperties, enum, minLength, maxLength, minimum, maximum, items, minItems, maxItems, description — with a root of type "object". `call` checks the input against `input` (a mismatch returns the contract with the errors) and the result against `output`.
- Names: 2 to 64 characters of a-z, 0-9, `_` and `-`, starting with a letter; the verbs' and builtins' names are reserved. Writing an existing name replaces it; `options: {{delete: true}}` removes it (a builtin cannot be deleted: grants decide those).
- Calling one needs its runtime on this host and your `execute` grant. Result: {{name, cid, kind}}.

## `hm://<account>/<path>`
Publishes signed hypermedia (canonical DAG-CBOR blobs, Ed25519) on this server's embedded node, as one of your signing identities: the account in the address picks it, or `options.signer` (a profile name or public key). Needs the publish grant. `content` is markdown in Seed's dialect (frontmatter, `<!-- id:… -->` block markers, nested headings, lists, code, math, images, `<hm://…>` embeds, tables), at most 256 KiB; metadata is at most 16 KiB encoded.
`options.action`:
- `document` (default): create. A name is required — `options.name`, `options.metadata.name` or a `name:` frontmatter line — and a nested path needs its parent. Options name, metadata.
- `update`: a new version. `content` replaces the body, keeping the ids of the blocks that survive; without `content`, only metadata changes (name, metadata; a null value removes a metadata key).
- `comment`: `content` is the comment, on the addressed document or on `options.target` (an hm:// address, optionally `?v=`); `options.replyTo` (a comment id `<author>/<tsid>`) answers a comment on the same document.
- `move`: `options.toPath`, within the same account; the old address redirects there. The home document cannot move.
- `redirect`: `options.toUrl` (an hm:// document). A loop, or a chain longer than readers follow (5), is refused; so is a missing or deleted target unless `skipLinkCheck`.
- `delete`: removes the document (the home document cannot be deleted).
- `fork`: copies `options.fromUrl` (an hm:// document, optionally `?v=`) to the address, which must be free; name and metadata rename the copy.
- `profile.update` (address `hm://<account>`): republishes the account's profile from options name, metadata or input ({{name, avatar, description}}).
move, redirect, delete, fork and profile.update take no `content`. `options.fromPath` (a markdown file in ~/memory, with only `signer` beside it) publishes that file, creating or updating the document. Every `hm://` link in the content is checked before anything is signed; `skipLinkCheck: true` allows links to what is not published yet. Unknown option keys are refused by name: extra command fields go in `options.input`, never as loose keys.
`dryRun: true` runs every check and builds every blob, then stores nothing. Result: {{action, id, version?, name?, signer, dryRun, blobs}} and the action's own fields.""",
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
- `script` (a script child): Python defining `def main(ctx):`, run durably in a sandbox; `ctx` calls tools, delegates model children (also in parallel), plans and logs; `input` becomes `ctx.input`. Always awaited.
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
- `ctx.now()`: milliseconds since the epoch (the same on replay). `ctx.log(level, message, data=None)`.
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

RUNTIMES = ("ts", "python", "shell")
"""`execute`'s runtimes, in contract order; a host serves the ones it offers (`narrowed`)."""
_RUNTIME_NAMES = {"ts": "TypeScript", "python": "Python", "shell": "shell"}
_RUNTIME_HOW = {
    "ts": '"ts" runs TypeScript',
    "python": '"python" runs it with the system python interpreter',
    "shell": '"shell" runs it with sh',
}


def _either(words: list[str]) -> str:
    """`a`, `a or b`, `a, b, or c`."""
    if len(words) <= 2:
        return " or ".join(words)
    return ", ".join(words[:-1]) + ", or " + words[-1]


def execute_description(runtimes: tuple[str, ...] | list[str]) -> str:
    """`execute`'s description, naming only `runtimes` (the ones the serving host offers)."""
    names = _either([_RUNTIME_NAMES[r] for r in RUNTIMES if r in runtimes])
    return (
        f"Run {names} code in an isolated sandbox with your persistent memory mounted at /workspace, which is also "
        "the working directory. Files your code reads and writes under /workspace are the same files as your "
        "~/memory addresses, so use this to process, transform, analyze, or generate memory files — parse data, "
        "convert formats, run computations, and save results. Each call runs in a fresh sandbox (a bubblewrap "
        "namespace: read-only system directories, a private /tmp, no other files of the host): no state "
        "(variables, processes, /tmp) survives between calls, so persist anything important as files under "
        "/workspace. Network access is off unless the server's owner turned it on, and CPU time, memory, processes "
        "and file sizes are limited. Output returns stdout, stderr, the exit code, and which memory files changed."
    )


def runtime_description(runtimes: tuple[str, ...] | list[str]) -> str:
    """The `runtime` property's description for `runtimes`."""
    return "How to run the code: " + ", ".join(_RUNTIME_HOW[r] for r in RUNTIMES if r in runtimes) + "."


EXECUTE = VerbSpec(
    name="execute",
    title="Execute Code",
    destructive=True,
    open_world=True,
    description=execute_description(RUNTIMES),
    input_schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "runtime": {
                "type": "string",
                "enum": list(RUNTIMES),
                "description": runtime_description(RUNTIMES),
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
    """`execute`'s contract as a host offering `runtimes` serves it: the runtime enum, the runtime property's
    description and the description's runtime sentence name only what is offered (unchanged if none or all are)."""
    if spec.name != "execute":
        return spec
    declared = spec.input_schema["properties"]["runtime"]["enum"]
    offered = [r for r in declared if r in runtimes]
    if not offered or len(offered) == len(declared):
        return spec
    schema = json.loads(json.dumps(spec.input_schema))
    schema["properties"]["runtime"]["enum"] = offered
    schema["properties"]["runtime"]["description"] = runtime_description(offered)
    return dataclasses.replace(spec, input_schema=schema, description=execute_description(offered))


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
    broken = surrogate_paths(arguments)
    if broken:
        # JSON can escape a lone surrogate (\ud800) that no UTF-8 text, file or log can hold.
        return [f"{path}: holds a lone surrogate, which is not valid Unicode; send valid UTF-8 text" for path in broken]
    out: list[str] = []
    for err in sorted(VALIDATORS[name].iter_errors(arguments), key=lambda e: list(e.absolute_path)):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        out.append(f"{path}: {err.message}")
    return out
