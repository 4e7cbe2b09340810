"""The verbs' contracts at their two levels, through the SDK client: a concise tools/list within its token budget,
full contracts from `read ~/tools/<verb>`, truthful annotations, strict-clean schemas, and per-host descriptions."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from bench.tokens import BUDGET, measure
from mcp_harness.callables.execute import EXECUTE, RUNTIMES, narrowed
from mcp_harness.callables.registry import CALLABLES
from mcp_harness.harness import Harness
from mcp_harness.memory import paths
from mcp_harness.runs.script_journal import MAX_JOURNAL_BYTES, MAX_JOURNAL_ENTRIES
from mcp_harness.sandbox import monty
from mcp_harness.server import build_server
from mcp_harness.spaces import memory as memory_read
from mcp_harness.spaces import threads
from mcp_harness.verbs import delegate, plan
from mcp_harness.verbs.contracts import VERBS
from tests.conftest import call, text_of

pytestmark = pytest.mark.anyio

RUNTIME_NAMES = {"ts": "TypeScript", "python": "Python", "shell": "shell"}


async def test_the_five_verbs_tools_list_stays_within_its_token_budget(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == list(VERBS)
    total, per_tool = measure(tools)
    assert total < BUDGET, f"tools/list is {total} o200k tokens ({per_tool}); the budget is {BUDGET}"


# -- strict-clean schemas ---------------------------------------------------------------------------------------

_KEYWORD_TYPES = {
    "properties": "object",
    "required": "object",
    "additionalProperties": "object",
    "items": "array",
    "minItems": "array",
    "maxItems": "array",
    "minLength": "string",
    "maxLength": "string",
    "minimum": "number",
    "maximum": "number",
}


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    return declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []


def strict_problems(schema: dict[str, Any], path: str = "$") -> list[str]:
    """Why a schema is not strict-clean: a value schema without a type, and what Ajv's strict mode (`strictTypes`,
    the check the TypeScript SDK's validator library carries) refuses: a union `type` other than `[T, "null"]`, and
    a keyword whose type the schema does not declare (`properties` without type object, …)."""
    problems: list[str] = []
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        if "type" in schema:
            problems.append(f"{path}: both type and anyOf")
        for i, branch in enumerate(branches):
            problems += strict_problems(branch, f"{path}.anyOf[{i}]")
        return problems
    declared = _types(schema)
    if not declared:
        problems.append(f"{path}: no type")
    elif len(declared) > 1 and not (len(declared) == 2 and "null" in declared):
        problems.append(f"{path}: union type {declared} (Ajv strict mode wants anyOf)")
    for keyword, kind in _KEYWORD_TYPES.items():
        applicable = kind in declared or (kind == "number" and "integer" in declared)
        if keyword in schema and not applicable:
            problems.append(f"{path}: {keyword} without type {kind}")
    for name, sub in (schema.get("properties") or {}).items():
        problems += strict_problems(sub, f"{path}.properties.{name}")
    if isinstance(schema.get("items"), dict):
        problems += strict_problems(schema["items"], f"{path}.items")
    return problems


def test_the_strict_check_finds_what_it_should() -> None:
    assert strict_problems({"type": "object", "properties": {"x": {"description": "untyped"}}}) == [
        "$.properties.x: no type"
    ]
    assert strict_problems({"type": ["string", "number"]}) != []
    assert strict_problems({"properties": {}}) == ["$: no type", "$: properties without type object"]
    assert strict_problems({"type": ["string", "null"]}) == []
    assert strict_problems({"anyOf": [{"type": "object"}, {"type": "null"}]}) == []


async def test_every_schema_property_has_a_type_and_is_strict_clean(client: Client) -> None:
    await call(client, "read", {"address": "~/tools/execute"})  # promoted: listed with its served contract
    listed = (await client.list_tools()).tools
    assert "execute" in [t.name for t in listed]
    schemas: list[tuple[str, dict[str, Any]]] = []
    for tool in listed:
        schemas.append((f"{tool.name} input", tool.input_schema))
        if tool.output_schema is not None:
            schemas.append((f"{tool.name} output", tool.output_schema))
    for spec in CALLABLES.values():  # search and web_search are not offered here, but their contracts are served
        schemas += [(f"{spec.name} input", spec.input_schema)]
        if spec.output_schema is not None:
            schemas.append((f"{spec.name} output", spec.output_schema))
    problems = [f"{where}: {p}" for where, schema in schemas for p in strict_problems(schema)]
    assert problems == []


async def test_annotations_are_truthful_and_the_title_is_not_repeated(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for tool in tools.values():
        assert tool.title == VERBS[tool.name].title
        assert tool.annotations is not None and tool.annotations.title is None
    hints = {n: t.annotations for n, t in tools.items()}
    read, write = hints["read"], hints["write"]
    assert read is not None and read.open_world_hint is True, "read fetches web pages"
    assert read.read_only_hint is True and read.destructive_hint is False
    assert write is not None and write.open_world_hint is True, "write downloads with fromUrl and publishes"


# -- two levels: the concise list and the full contract ---------------------------------------------------------


async def test_read_tools_verb_gives_the_full_contract_beyond_the_listed_description(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, spec in VERBS.items():
        listed = tools[name].description
        assert listed is not None and listed.rstrip().endswith(f"read ~/tools/{name}."), name
        assert spec.details, f"{name} has no full contract"
        result = await client.call_tool("read", {"address": f"~/tools/{name}"})
        contract = text_of(result)
        assert contract.startswith(f"# {name}\n\n{listed}\n\n{spec.details.strip()}\n\n## Input schema")
        assert len(contract) > 2 * len(listed)
        data = result.structured_content
        assert data is not None and data["details"] == spec.details and data["description"] == listed


async def test_write_documents_from_url_at_both_levels(client: Client) -> None:
    listed = next(t for t in (await client.list_tools()).tools if t.name == "write")
    assert listed.description is not None and "fromUrl" in listed.description
    contract = text_of(await client.call_tool("read", {"address": "~/tools/write"}))
    assert "options: {fromUrl:" in contract and "max_download_bytes" in contract


def test_the_full_contracts_state_the_limits_the_code_enforces() -> None:
    """The numbers in the contracts are the constants the code checks, so a changed limit fails here."""
    read, write = VERBS["read"].details or "", VERBS["write"].details or ""
    for text in (read, write):
        assert f"more than {paths.MAX_MEMORY_PATH_DEPTH} segments" in text
        assert f"more than {paths.MAX_MEMORY_PATH_BYTES} bytes in all or {paths.MAX_SEGMENT_BYTES} in one name" in text
        assert paths.TMP_PREFIX in text
    assert f"an integer from 1 to {threads.MAX_THREAD_LIMIT}" in read
    assert f"at most {memory_read.MAX_PAGE_BYTES // 1024} KiB of UTF-8" in read
    assert f"over {memory_read.INLINE_BYTES // 1024} KiB travels once" in read
    assert f"(1 to {memory_read.MAX_LISTING_LIMIT}, default {memory_read.DEFAULT_LISTING_LIMIT})" in read
    assert f"last {threads.THREAD_EVENT_WINDOW} events" in read
    assert f"{threads.MAX_TRANSCRIPT_CHARS:,} characters" in read
    plan_text = VERBS["plan"].description + (VERBS["plan"].details or "")
    assert f"{plan.MAX_PLAN_STEPS} steps" in plan_text and f"{plan.MAX_LABEL_CHARS} characters" in plan_text
    steps = VERBS["plan"].input_schema["properties"]["steps"]
    assert steps["maxItems"] == plan.MAX_PLAN_STEPS
    assert steps["items"]["properties"]["label"]["maxLength"] == plan.MAX_LABEL_CHARS
    assert VERBS["plan"].input_schema["properties"]["title"]["maxLength"] == plan.MAX_LABEL_CHARS
    details = VERBS["delegate"].details or ""
    assert f"at most {delegate.MAX_DEPTH} levels" in details
    assert f"already has {delegate.MAX_CHILDREN_PER_RUN} children" in details
    assert f"at most {delegate.MAX_SESSION_CHILDREN} model children at once" in details
    assert f"at most {delegate.MAX_BRIEF_BYTES // 1024} KiB" in details
    assert f"about {monty.FUEL_S:g} s of pure compute" in details
    assert f"{monty.MAX_MEMORY // (1024 * 1024)} MiB of memory" in details
    assert f"recursion depth {monty.MAX_RECURSION}" in details
    assert f"over {monty.MAX_SOURCE_BYTES // 1024} KiB" in details
    assert f"{MAX_JOURNAL_ENTRIES:,} entries or {MAX_JOURNAL_BYTES // (1024 * 1024)} MiB" in details


# -- the delegate answer schema, checked against real answers ----------------------------------------------------


async def test_delegate_answers_match_the_declared_output_schema(scripted: Harness) -> None:
    validator = Draft202012Validator(VERBS["delegate"].output_schema or {})
    script = "def main(ctx):\n    return ctx.input[1]\n"
    async with Client(build_server(scripted), mode="legacy") as client:
        with anyio.fail_after(30):
            by_script = await call(client, "delegate", {"script": script, "input": ["a", "b"]})
            model = await call(client, "delegate", {"brief": "Say done"})
        detached = await call(client, "delegate", {"brief": "In the background", "await": False})
    assert by_script["sessionId"] is None and by_script["output"] == "b"
    assert isinstance(model["sessionId"], str) and model["output"] == {"text": "done"}
    assert detached["status"] == "detached" and isinstance(detached["runId"], str)
    for answer in (by_script, model, detached):
        assert list(validator.iter_errors(answer)) == [], answer


# -- execute's contract names only the runtimes this host offers ------------------------------------------------


def _named(text: str) -> list[str]:
    return [r for r in RUNTIMES if RUNTIME_NAMES[r] in text.split(" code in an isolated sandbox")[0]]


@pytest.mark.parametrize("offered", [("python",), ("shell",), ("python", "shell"), ("ts", "shell"), RUNTIMES])
def test_narrowed_execute_rewrites_the_runtime_sentence(offered: tuple[str, ...]) -> None:
    spec = narrowed(EXECUTE, offered)
    assert _named(spec.description) == list(offered)
    runtime = spec.input_schema["properties"]["runtime"]
    assert runtime["enum"] == list(offered)
    assert [r for r in RUNTIMES if f'"{r}" runs' in runtime["description"]] == list(offered)
    assert EXECUTE.input_schema["properties"]["runtime"]["enum"] == list(RUNTIMES), "the base contract is untouched"
    if len(offered) == 1:
        assert spec.description.startswith(f"Run {RUNTIME_NAMES[offered[0]]} code in an isolated sandbox")


async def test_execute_is_served_naming_only_the_offered_runtimes(client: Client, harness: Harness) -> None:
    offered = list(harness.sandbox_runtimes())
    assert offered, "this host runs the sandbox tests, so it offers execute"
    contract = await call(client, "read", {"address": "~/tools/execute", "format": "json"})
    assert _named(contract["description"]) == offered
    assert contract["input"]["properties"]["runtime"]["enum"] == offered
    promoted = next(t for t in (await client.list_tools()).tools if t.name == "execute")
    assert isinstance(promoted, types.Tool) and promoted.description is not None
    assert _named(promoted.description) == offered
    if "ts" not in offered:
        assert "TypeScript" not in promoted.description and "TypeScript" not in str(promoted.input_schema)
