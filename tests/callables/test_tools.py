"""Tools as documents (HARNESS §4–§5) through the MCP client: listings, contracts with CIDs, authoring, `call`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_harness.callables.documents import builtin_document, cid_of_bytes
from mcp_harness.config import load_settings
from mcp_harness.definition import normalize_definition
from mcp_harness.harness import Harness
from mcp_harness.server import build_server
from tests.conftest import call, refused, text_of

pytestmark = pytest.mark.anyio

ECHO_TOOL = {
    "description": "Echo the input back. Returns what it was given.",
    "input": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0}}, "required": ["x"]},
    "source": "def main(input):\n    return input\n",
    "runtime": "python",
}


async def test_listing_shows_verbs_granted_builtins_and_authored_tools(client: Client, harness: Harness) -> None:
    await call(client, "write", {"address": "~/tools/echo", "content": json.dumps(ECHO_TOOL)})
    listing = await call(client, "read", {"address": "~/tools/"})
    assert listing["verbs"] == ["read", "write", "call", "delegate", "plan"]
    assert listing["tools"] == ["echo", "execute", "search"]
    assert listing["summary"] == "5 verbs and 3 callable tools."
    assert "- echo — Echo the input back. (authored)" in listing["markdown"]
    line = next(x for x in listing["markdown"].splitlines() if x.startswith("- execute — Run "))
    offered = harness.sandbox_runtimes()  # the summary names exactly the runtimes this host offers
    names = {"ts": "TypeScript", "python": "Python", "shell": "shell"}
    assert [names[r] in line for r in names] == [r in offered for r in names]
    # web_search needs a SearXNG instance, so without one it is not offered even though it is granted.
    assert "web_search" not in listing["tools"]


async def test_builtin_contract_carries_its_cid_and_the_narrowed_runtime_enum(client: Client, harness: Harness) -> None:
    result = await client.call_tool("read", {"address": "~/tools/execute"})
    data = result.structured_content
    assert data is not None and data["kind"] == "builtin" and data["binding"] == "execute"
    assert data["cid"].startswith("bafyrei")
    assert f"> builtin tool · version `{data['cid']}`" in text_of(result)
    offered = list(harness.sandbox_runtimes())
    assert data["input"]["properties"]["runtime"]["enum"] == [r for r in ["ts", "python", "shell"] if r in offered]
    record = harness.tools.get(harness.agent().id, "execute")
    assert record is not None and record.cid == data["cid"]
    # The stored bytes are exactly what the CID hashes.
    assert cid_of_bytes(record.document.encode()) == record.cid


def test_builtins_are_rewritten_only_when_their_cid_changes(harness: Harness) -> None:
    from mcp_harness.callables import catalog
    from mcp_harness.callables.registry import CALLABLES

    agent = harness.agent()
    catalog.visible_documents(harness, agent)
    first = {r.name: r for r in harness.tools.list(agent.id)}
    assert set(first) == {"search", "web_search", "execute"}

    def reopened() -> Harness:  # as a new process would: no in-memory memo of what was materialized
        return Harness(load_settings(data_dir=harness.data_dir))

    fresh = reopened()
    try:
        catalog.visible_documents(fresh, agent)
        again = {r.name: (r.cid, r.updated_at) for r in fresh.tools.list(agent.id)}
        assert again == {n: (r.cid, r.updated_at) for n, r in first.items()}
        with fresh.db.transaction() as conn:  # a stale row, as an older contract would have left it
            conn.execute("UPDATE tool_documents SET cid = 'bafystale', enabled = 0 WHERE name = 'search'")
    finally:
        fresh.close()
    fresh = reopened()
    try:
        fresh.tools.ensure_builtins(agent.id, [builtin_document(CALLABLES["search"])])
        search = fresh.tools.get(agent.id, "search")
        assert search is not None and search.cid == first["search"].cid
        assert search.enabled is False, "a rewrite must not touch the enabled flag"
    finally:
        fresh.close()


async def test_an_ungranted_builtin_reads_exactly_like_a_missing_name(harness: Harness) -> None:
    agent = harness.agent()
    harness.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "tools": ["publish"]}))
    async with Client(build_server(harness)) as c:
        ungranted = await call(c, "read", {"address": "~/tools/execute"})
        missing = await call(c, "read", {"address": "~/tools/nothing_here"})
        assert ungranted["summary"] == "No tool named execute. Here is what you can read and call."
        assert {k: v for k, v in ungranted.items() if k != "summary"} == {
            k: v for k, v in missing.items() if k != "summary"
        }
        assert ungranted["tools"] == []
        listed = await call(c, "call", {"tool": "execute", "input": {"runtime": "python", "code": "print(1)"}})
        assert listed["summary"] == "No callable tool named execute. Here is what you can call."
        assert (await call(c, "read", {"address": "~/self"}))["grants"]["callableTools"] == []


async def test_authoring_validates_every_rule_in_order(client: Client) -> None:
    async def refusal(name: str, body: Any) -> str:
        content = body if isinstance(body, str) else json.dumps(body)
        return (await refused(client, "write", {"address": f"~/tools/{name}", "content": content}))["message"]

    assert "expects JSON content: {description, input?, output?, source, runtime?, summary?}" in await refusal(
        "good", "not json"
    )
    assert "expects a JSON object" in await refusal("good", [1, 2])
    assert "lowercase [a-z0-9_-]" in await refusal("Bad", ECHO_TOOL)
    assert "lowercase [a-z0-9_-]" in await refusal("x", ECHO_TOOL)
    for reserved in ("execute", "search", "read", "return_result", "navigate"):
        assert "is a builtin tool or verb and cannot be replaced" in await refusal(reserved, ECHO_TOOL)
    assert "needs a description" in await refusal("good", {**ECHO_TOOL, "description": "   "})
    assert "over 16384 bytes" in await refusal("good", {**ECHO_TOOL, "description": "d" * 16385})
    assert "needs source" in await refusal("good", {**ECHO_TOOL, "source": " \n"})
    assert "over 262144 bytes" in await refusal("good", {**ECHO_TOOL, "source": "#" * (256 * 1024 + 1)})
    assert "unsupported schema keyword '$schema'" in await refusal(
        "good", {**ECHO_TOOL, "input": {"$schema": "x", "type": "object"}}
    )
    assert 'the root must be type "object"' in await refusal("good", {**ECHO_TOOL, "input": {"type": "string"}})
    assert "$output" in await refusal("good", {**ECHO_TOOL, "output": {"type": "object", "oneOf": []}})
    assert "Unknown tool document field(s) code" in await refusal("good", {**ECHO_TOOL, "code": "x"})
    error = await refused(client, "write", {"address": "~/tools/good", "options": {"tool": ECHO_TOOL, "x": 1}})
    assert 'does not understand option "x". Supported options: delete, tool.' in error["message"]
    listing = await call(client, "read", {"address": "~/tools/"})
    assert "good" not in listing["tools"], "a refused write must store nothing"


async def test_authoring_saves_replaces_and_deletes_a_lambda(client: Client) -> None:
    saved = await call(client, "write", {"address": "~/tools/echo", "options": {"tool": ECHO_TOOL}})
    assert saved["kind"] == "lambda" and saved["name"] == "echo" and saved["cid"].startswith("bafyrei")
    assert saved["summary"].startswith(f"Saved tool echo ({saved['cid']}).")
    contract = await client.call_tool("read", {"address": "~/tools/echo"})
    assert "```python\ndef main(input):" in text_of(contract)
    assert f"> lambda tool · version `{saved['cid']}` · python" in text_of(contract)
    replaced = await call(
        client, "write", {"address": "~/tools/echo", "content": json.dumps({**ECHO_TOOL, "summary": "S"})}
    )
    assert replaced["cid"] != saved["cid"]
    read_back = await call(client, "read", {"address": "~/tools/echo", "format": "json"})
    assert read_back["toolSummary"] == "S" and read_back["summary"] == "Contract of the lambda tool echo."
    error = await refused(client, "write", {"address": "~/tools/execute", "options": {"delete": True}})
    assert "disable it via the agent's tool grants" in error["message"]
    gone = await call(client, "write", {"address": "~/tools/echo", "options": {"delete": True}})
    assert gone["deleted"] is True
    again = await call(client, "write", {"address": "~/tools/echo", "options": {"delete": True}})
    assert again["deleted"] is False


async def test_lambda_cid_matches_the_javascript_reference(client: Client, harness: Harness) -> None:
    """The same JSON document hashes to the same CID here and in @ipld/dag-cbor (tests/js/oracle.mjs)."""
    body = {**ECHO_TOOL, "input": {"type": "object", "properties": {"n": {"type": "number", "minimum": 1.0}}}}
    saved = await call(client, "write", {"address": "~/tools/oracle_check", "content": json.dumps(body)})
    record = harness.tools.get(harness.agent().id, "oracle_check")
    assert record is not None
    doc_json = json.dumps(record.document.to_json())
    oracle = Path(__file__).parents[1] / "js" / "oracle.mjs"
    done = subprocess.run(
        ["node", str(oracle)], input=json.dumps([doc_json]), capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout)[0]["cid"] == saved["cid"]


async def test_call_misses_never_punish_the_caller(client: Client) -> None:
    unknown = await call(client, "call", {"tool": "bash", "input": {"cmd": "ls"}})
    assert unknown["summary"] == "No callable tool named bash. Here is what you can call."
    assert "execute" in unknown["tools"]
    verb = await call(client, "call", {"tool": "read", "input": {"address": "~/self"}})
    assert verb["summary"] == "No callable tool named read. Here is what you can call."
    empty = await call(client, "call", {"tool": "  "})
    assert empty["summary"].startswith("call requires a tool name.")
    missing = await call(client, "call", {"tool": "execute", "input": {"runtime": "python"}})
    assert missing["summary"].startswith("Input for execute did not match its contract")
    assert "$.code: is required" in missing["validationErrors"]
    assert missing["contract"].startswith("# execute")
    wrong = await call(client, "call", {"tool": "execute_code", "input": {"runtime": 3, "code": "x", "extra": 1}})
    assert "$.runtime: expected string, got integer" in wrong["validationErrors"]
    assert any(e.startswith("$.extra: is not allowed") for e in wrong["validationErrors"])
    ts = await call(client, "call", {"tool": "execute", "input": {"runtime": "cobol", "code": "x"}})
    assert any(e.startswith("$.runtime: must be one of") for e in ts["validationErrors"])


async def test_a_tool_without_a_runtime_is_saved_in_one_this_host_runs(client: Client, harness: Harness) -> None:
    """A Python `main` written with no runtime used to be saved as TypeScript, and failed at every call."""
    body = {"description": "Add two numbers.", "source": "def main(input):\n    return input['a'] + input['b']\n"}
    await call(client, "write", {"address": "~/tools/add", "content": json.dumps(body)})
    record = harness.tools.get(harness.agent().id, "add")
    assert record is not None and record.document.runtime == "python"
    contract = text_of(await client.call_tool("read", {"address": "~/tools/add"}))
    assert "· python" in contract and "```python\ndef main(input):" in contract
    assert (await call(client, "call", {"tool": "add", "input": {"a": 2, "b": 3}}))["result"] == 5
    ts = {**body, "source": "export default (i) => i.a + i.b", "runtime": "ts"}
    await call(client, "write", {"address": "~/tools/add_ts", "content": json.dumps(ts)})
    ts_record = harness.tools.get(harness.agent().id, "add_ts")
    assert ts_record is not None and ts_record.document.runtime == "typescript"
    ts_contract = text_of(await client.call_tool("read", {"address": "~/tools/add_ts"}))
    assert "· typescript" in ts_contract and "```typescript\nexport default" in ts_contract


async def test_an_unknown_runtime_is_refused_with_the_accepted_set(client: Client) -> None:
    for runtime in ("cobol", "py", "Python", 3):
        body = {**ECHO_TOOL, "runtime": runtime}
        error = await refused(client, "write", {"address": "~/tools/echo", "content": json.dumps(body)})
        assert error["status"] == 400
        assert error["message"] == (
            f'Tool echo has runtime {json.dumps(runtime)}, which is not a tool runtime. Accepted: "python" (a '
            'top-level main(input)) or "typescript" (also "ts"; a default export); left out, it is python here.'
        )
    listing = await call(client, "read", {"address": "~/tools/"})
    assert "echo" not in listing["tools"]


def test_the_default_runtime_follows_what_the_host_offers() -> None:
    from mcp_harness.callables.documents import validate_lambda

    body = {"description": "D.", "source": "x"}
    assert validate_lambda("t1", body, ("ts", "python", "shell")).runtime == "python"
    assert validate_lambda("t1", body, ("ts", "shell")).runtime == "typescript"
    assert validate_lambda("t1", body, ()).runtime == "python"
    assert validate_lambda("t1", body).runtime == "python"


async def test_a_crashing_lambda_is_the_tool_failing_not_a_bad_request(client: Client) -> None:
    """A 400 said the caller's request was wrong (and the CLI exited 2, "usage"); the tool's own code failed."""
    crash = {**ECHO_TOOL, "source": "def main(input):\n    raise ValueError('boom')\n"}
    await call(client, "write", {"address": "~/tools/crash", "content": json.dumps(crash)})
    error = await refused(client, "call", {"tool": "crash", "input": {"x": 1}})
    assert (error["status"], error["code"]) == (502, "tool-failed")
    assert error["message"].startswith("Tool crash failed (exit 1).") and "ValueError: boom" in error["message"]
    liar = {**ECHO_TOOL, "output": {"type": "object", "properties": {"x": {"type": "string"}}}}
    await call(client, "write", {"address": "~/tools/liar", "content": json.dumps(liar)})
    error = await refused(client, "call", {"tool": "liar", "input": {"x": 1}})
    assert (error["status"], error["code"]) == (502, "tool-failed")
    miss = await call(client, "call", {"tool": "crash", "input": {"x": "one"}})  # the caller's mistake: no error
    assert miss["summary"].startswith("Input for crash did not match its contract")


async def test_self_says_which_granted_tools_this_host_cannot_run(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bubblewrap on this host
    agent = harness.agent()
    harness.agents.update(agent.id, normalize_definition({**agent.definition.to_json(), "tools": ["execute"]}))
    async with Client(build_server(harness)) as c:
        me = await call(c, "read", {"address": "~/self"})
        assert me["grants"] == {"callableTools": [], "publish": False}
        [execute] = me["unavailableGrants"]
        assert execute["tool"] == "execute"
        assert execute["reason"].startswith("granted, but this host cannot run the sandbox: bubblewrap (bwrap) is not")
        assert execute["reason"].endswith("— run `mcp-harness doctor`.")
        text = text_of(await c.call_tool("read", {"address": "~/self"}))
        assert "- execute: granted, but this host cannot run the sandbox: bubblewrap" in text


async def test_self_names_a_web_search_grant_without_an_engine(harness: Harness) -> None:
    agent = harness.agent()
    raw = {**agent.definition.to_json(), "tools": ["execute", "web_search"]}
    harness.agents.update(agent.id, normalize_definition(raw))
    async with Client(build_server(harness)) as c:
        me = await call(c, "read", {"address": "~/self"})
    assert me["grants"]["callableTools"] == ["execute"]
    assert me["unavailableGrants"] == [
        {
            "tool": "web_search",
            "reason": "granted, but this host has no search engine: set [web] searxng_url (a SearXNG instance) in "
            "the config.",
        }
    ]
