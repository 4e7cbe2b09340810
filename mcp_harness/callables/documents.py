"""Tool documents: every tool an agent holds, as a content-addressed document (HARNESS §4).

A document's identity is its CID: canonical DAG-CBOR bytes, sha2-256, CIDv1 with the dag-cbor codec. Builtins are
derived from their contracts (`registry.py`); lambdas are authored by the agent with `write ~/tools/<name>` and
validated here before anything is stored.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from mcp_harness.callables.registry import RESERVED_TOOL_NAMES
from mcp_harness.errors import BadRequest
from mcp_harness.verbs.schema_subset import shape_errors
from mcp_harness.verbs.spec import VerbSpec

ToolKind = Literal["builtin", "lambda", "mcp"]
"""`mcp`: a tool of another MCP server mounted behind `call` (callables/upstream.py)."""

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{1,63}$")
MAX_DESCRIPTION_BYTES = 16 * 1024
MAX_SOURCE_BYTES = 256 * 1024
SUMMARY_CHARS = 140


def summary_of(description: str) -> str:
    """The first sentence (split at a `.` followed by whitespace), cut to 137 characters plus `…` past 140."""
    first = re.split(r"(?<=\.)\s", description, maxsplit=1)[0]
    return first if len(first) <= SUMMARY_CHARS else first[:137] + "…"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolDocument:
    """`{name, kind, summary, description, input, output?, source?, runtime?, binding?}`; absent optionals omitted."""

    name: str
    kind: ToolKind
    summary: str
    description: str
    input: dict[str, Any]
    output: dict[str, Any] | None = None
    source: str | None = None
    runtime: str | None = None
    binding: str | None = None
    annotations: dict[str, Any] | None = None
    """An `mcp` tool's MCP annotations (hints, title) as its server declares them."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "summary": self.summary,
            "description": self.description,
            "input": self.input,
        }
        for key in ("output", "source", "runtime", "binding", "annotations"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolDocument:
        return cls(
            name=data["name"],
            kind=data["kind"],
            summary=data["summary"],
            description=data["description"],
            input=data["input"],
            output=data.get("output"),
            source=data.get("source"),
            runtime=data.get("runtime"),
            binding=data.get("binding"),
            annotations=data.get("annotations"),
        )

    def encode(self) -> bytes:
        """The canonical DAG-CBOR bytes the CID is computed over."""
        from mcp_harness.hypermedia import encode, from_json

        # from_json reads the document as JavaScript's JSON.parse would, so CIDs agree with the reference's.
        return encode(from_json(self.to_json()))


def cid_of_bytes(data: bytes) -> str:
    from mcp_harness.hypermedia import cid_of

    return str(cid_of(data))


def builtin_document(spec: VerbSpec) -> ToolDocument:
    return ToolDocument(
        name=spec.name,
        kind="builtin",
        summary=summary_of(spec.description),
        description=spec.description,
        input=spec.input_schema,
        output=spec.output_schema,
        binding=spec.name,
    )


def contract_markdown(doc: ToolDocument, cid: str) -> str:
    """`# name`, a version line with the CID, the description, the schemas, and for a lambda its source."""
    version = f"> {doc.kind} tool · version `{cid}`" + (f" · {doc.runtime}" if doc.runtime else "")
    parts = [f"# {doc.name}", "", version, "", doc.description, "", "## Input schema", "```json"]
    if doc.kind == "mcp" and doc.binding:  # where it runs: `mcp://<server>/<tool>`
        server, _, tool = doc.binding.removeprefix("mcp://").partition("/")
        parts[5:5] = ["", f'Tool {tool} of the MCP server {server}, run by call {{tool: "{doc.name}", input}}.']
    parts += [json.dumps(doc.input, indent=2, ensure_ascii=False), "```"]
    if doc.output is not None:
        parts += ["", "## Output schema", "```json", json.dumps(doc.output, indent=2, ensure_ascii=False), "```"]
    if doc.annotations:
        parts += ["", "## Annotations", "```json", json.dumps(doc.annotations, indent=2, ensure_ascii=False), "```"]
    if doc.kind == "lambda" and doc.source is not None:
        # The fence names the language the source runs as, so a reader sees what the sandbox will run.
        fence = "python" if doc.runtime == "python" else "typescript"
        entry = "a top-level `main(input)` (sync or async)" if fence == "python" else "its default export"
        parts += [
            "",
            f"Runs in the execute sandbox: {entry} receives the validated input; its return value is the result.",
            "",
            "## Source",
            f"```{fence}",
            doc.source,
            "```",
        ]
    return "\n".join(parts)


LAMBDA_SHAPE = "{description, input?, output?, source, runtime?, summary?}"
LAMBDA_RUNTIMES = {"python": "python", "typescript": "typescript", "ts": "typescript"}
"""Accepted spellings of a lambda's runtime and what is stored. `ts` is the execute tool's name for TypeScript."""


def lambda_runtime(name: str, given: object, offered: tuple[str, ...] | None) -> str:
    """The stored runtime: the one named, or when none is, one this host runs (python first).

    The reference stores anything but "python" as TypeScript, so a Python tool written without a runtime was saved
    as TypeScript and failed at every call; here an unknown runtime is refused while the tool is being written.
    """
    if given is None:
        if offered is not None and "python" not in offered and "ts" in offered:
            return "typescript"
        return "python"
    runtime = LAMBDA_RUNTIMES.get(given) if isinstance(given, str) else None
    if runtime is None:
        raise BadRequest(
            f'Tool {name} has runtime {json.dumps(given)}, which is not a tool runtime. Accepted: "python" (a '
            'top-level main(input)) or "typescript" (also "ts"; a default export); left out, it is '
            f"{lambda_runtime(name, None, offered)} here."
        )
    return runtime


def validate_lambda(name: str, body: object, offered: tuple[str, ...] | None = None) -> ToolDocument:
    """A lambda document from an authoring request, or a 400 naming the first rule it breaks (HARNESS §4 order).

    `offered` is the sandbox runtimes of this host (`Harness.sandbox_runtimes`), which pick the default runtime.
    """
    if not isinstance(body, dict):
        raise BadRequest(f"write ~/tools/{name} expects a JSON object: {LAMBDA_SHAPE}.")
    data: dict[str, Any] = body  # pyright: ignore[reportUnknownVariableType]
    if not NAME_PATTERN.match(name):
        raise BadRequest(f"Tool name must be lowercase [a-z0-9_-], start with a letter, 2-64 chars (got {name!r}).")
    if name in RESERVED_TOOL_NAMES:
        raise BadRequest(f'"{name}" is a builtin tool or verb and cannot be replaced.')
    unknown = sorted(set(data) - {"name", "description", "input", "output", "source", "runtime", "summary"})
    if unknown:
        raise BadRequest(f"Unknown tool document field(s) {', '.join(unknown)}. Accepted: {LAMBDA_SHAPE}.")
    description = data.get("description")
    description = description.strip() if isinstance(description, str) else ""
    if not description:
        raise BadRequest(f"Tool {name} needs a description: what it does and what it returns.")
    if len(description.encode("utf-8")) > MAX_DESCRIPTION_BYTES:
        raise BadRequest(f"Tool {name}'s description is over {MAX_DESCRIPTION_BYTES} bytes; shorten it.")
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        raise BadRequest(f"Tool {name} needs source: the code of its main function.")
    if len(source.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise BadRequest(f"Tool {name}'s source is over {MAX_SOURCE_BYTES} bytes.")
    runtime = lambda_runtime(name, data.get("runtime"), offered)
    schema_in = data.get("input", {"type": "object"})
    problems = shape_errors(schema_in)
    output = data.get("output")
    if output is not None:
        problems += [p.replace("$", "$output", 1) for p in shape_errors(output)]
    if problems:
        raise BadRequest(f"Tool {name} has a schema outside the supported subset: {'; '.join(problems)}.")
    given = data.get("summary")
    summary = given.strip()[:SUMMARY_CHARS] if isinstance(given, str) and given.strip() else summary_of(description)
    doc = ToolDocument(
        name=name,
        kind="lambda",
        summary=summary,
        description=description,
        input=schema_in,  # pyright: ignore[reportArgumentType]
        output=output,  # pyright: ignore[reportArgumentType]
        source=source,
        runtime=runtime,
    )
    try:
        doc.encode()
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"Tool {name} cannot be stored as a document: {exc}.") from None
    return doc
