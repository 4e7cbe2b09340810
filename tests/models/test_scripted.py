"""The scripted client: replies by brief and turn, classified errors, delays, and its script file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from mcp_harness.harness import Harness
from mcp_harness.models.clients import client_for, open_client
from mcp_harness.models.scripted import NO_SCRIPT_TEXT, ScriptedClient
from mcp_harness.models.wire import ModelResponse, ProviderError, ToolCall, Usage
from tests.models.conftest import ask

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("_fresh_http_client")]


SCRIPT = {
    "rules": [
        {
            "when": "research",
            "turns": [
                {"text": "Searching.", "toolCalls": [{"name": "read", "input": {"address": "~/a"}}, {"name": "plan"}]},
                {"toolCalls": [{"name": "read", "input": {}, "id": "mine"}], "usage": {"input": 5, "output": 7}},
                "Done researching.",
            ],
        },
        {"when": "flaky", "turns": [{"error": {"status": 503, "message": "overloaded"}, "times": 2, "text": "ok"}]},
        {
            "when": "broken",
            "turns": [{"error": {"status": 401, "message": "bad key"}}, {"error": {"message": "reset"}}],
        },
        {"when": "slow", "turns": [{"text": "late", "delayMs": 50}]},
    ],
    "replies": ["default"],
}


async def test_scripted_replies_follow_the_brief_and_the_turn_and_repeat_the_last() -> None:
    client = ScriptedClient(SCRIPT)
    first = await client.complete(ask("Do some research on X"))
    assert first == ModelResponse(
        "Searching.",
        (ToolCall("call-0-0", "read", {"address": "~/a"}), ToolCall("call-0-1", "plan", {})),
        Usage(),
        stop_reason="tool_use",
        model="scripted",
    )
    second = await client.complete(ask("Do some research on X", 1))
    assert second.tool_calls == (ToolCall("mine", "read", {}),) and second.usage == Usage(5, 7)
    assert (await client.complete(ask("Do some research on X", 2))).text == "Done researching."
    assert (await client.complete(ask("Do some research on X", 9))).text == "Done researching."
    # Another conversation (as a parallel child's would be) starts at its own first turn.
    assert (await client.complete(ask("Something else", 3))).text == "default"
    assert (await client.complete(ask("research again"))).text == "Searching."


async def test_scripted_error_replies_raise_classified_errors_and_times_lets_a_retry_succeed() -> None:
    client = ScriptedClient(SCRIPT)
    for _ in range(2):
        with pytest.raises(ProviderError) as caught:
            await client.complete(ask("flaky job", context_key="s1"))
        assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("provider-error", True, 503)
    # A new client (a retried run builds one) continues the count; another session counts on its own.
    assert (await ScriptedClient(SCRIPT).complete(ask("flaky job", context_key="s1"))).text == "ok"
    with pytest.raises(ProviderError):
        await client.complete(ask("flaky job", context_key="s2"))
    with pytest.raises(ProviderError) as caught:
        await client.complete(ask("broken"))
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("config-error", False, 401)
    with pytest.raises(ProviderError) as caught:
        await client.complete(ask("broken", 1))
    assert (caught.value.code, caught.value.retryable, caught.value.http_status) == ("provider-error", True, None)


async def test_scripted_delay_waits_before_replying() -> None:
    start = anyio.current_time()
    assert (await ScriptedClient(SCRIPT).complete(ask("slow"))).text == "late"
    assert anyio.current_time() - start >= 0.05


async def test_scripted_plain_list_and_replies_forms_and_refusals() -> None:
    for script in (["one", {"text": "two"}], {"replies": ["one", {"text": "two"}]}):
        client = ScriptedClient(script)
        assert [(await client.complete(ask("any", n))).text for n in range(3)] == ["one", "two", "two"]
    with pytest.raises(ProviderError) as caught:
        await ScriptedClient({"rules": [{"when": "only this", "turns": ["x"]}]}).complete(ask("other"))
    assert caught.value.code == "config-error"
    for bad in ([], {"rules": [{"turns": []}]}, [{"toolCalls": [{"input": {}}]}], {"replies": ["x"], "extra": 1}):
        with pytest.raises(ProviderError) as caught:
            ScriptedClient(bad)
        assert caught.value.code == "config-error"


async def test_the_scripted_provider_reads_its_file_and_without_one_says_it_has_no_script(
    tmp_path: Path, open_harness: Callable[..., Harness]
) -> None:
    script = tmp_path / "script.json"
    rules = {"rules": [{"when": "hello", "turns": ["Hi there."]}], "replies": ["Pardon?"]}
    script.write_text(json.dumps(rules), encoding="utf-8")
    h = open_harness(demo={"type": "scripted", "file": str(script)})
    demo = await open_client(h, "demo")
    assert [(await demo.complete(ask(brief))).text for brief in ("hello world", "bye")] == ["Hi there.", "Pardon?"]
    assert (await (await open_client(h, "scripted")).complete(ask("anything"))).text == NO_SCRIPT_TEXT
    script.write_text("not json", encoding="utf-8")
    with pytest.raises(ProviderError) as caught:
        client_for(h, "demo")
    assert caught.value.code == "config-error"
