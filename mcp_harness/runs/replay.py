"""Durable session events → the conversation a model sees (HARNESS §1.1, §12, §13).

The log keeps full outputs; the model sees each tool result bounded at 8 KiB with the reference's notice. The
user's own verb calls become `<user_action>` messages, escaped so their content cannot forge framing. A delegate
call still waiting on its child gets a synthetic "still running" result, so the conversation stays well-formed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mcp_harness.models.wire import Message, ToolCall
from mcp_harness.runs.prompt import escape_framing
from mcp_harness.store.sessions import EventRecord

MAX_MODEL_TOOL_RESULT_BYTES = 8192
STILL_RUNNING = {"status": "running", "note": "Still running in the background; its result arrives when it finishes."}


def bound(text: str, limit: int = MAX_MODEL_TOOL_RESULT_BYTES) -> str:
    """The text as a model may see it: at most `limit` UTF-8 bytes, with the reference's truncation notice."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    kept_bytes = len(kept.encode("utf-8"))
    return (
        f"{kept}\n\n[RESULT TRUNCATED: {len(data)} bytes total, only the first {kept_bytes} bytes are shown. "
        "Retrying this exact call will truncate the same way. You must work with the data in bounded pieces instead: "
        "request a narrower slice if the tool supports it (a specific block, view, page, or query), or get the full "
        "data into a memory file (e.g. write ~/memory/<path> with {fromUrl} or {fromAttachment}) and process it with "
        "the execute tool, printing only the small portion you need.]"
    )


def result_text(payload: dict[str, Any]) -> str:
    if "error" in payload:
        return f"Error: {payload['error']}"
    output = payload.get("output")
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _user_action(kind: str, verb: str, body: str) -> Message:
    return Message(role="user", content=f'<{kind} verb="{verb}">\n{escape_framing(bound(body))}\n</{kind}>')


def replay(events: Iterable[EventRecord], *, pending_spawns: set[str] = frozenset()) -> list[Message]:  # pyright: ignore[reportArgumentType]
    """The model conversation for a session's events, in order."""
    messages: list[Message] = []
    calls: list[ToolCall] = []
    text: str | None = None
    results: list[Message] = []
    answered: set[str] = set()

    def flush() -> None:
        nonlocal calls, text, results
        if text is not None or calls:
            messages.append(Message(role="assistant", content=text or "", tool_calls=tuple(calls)))
            for call in calls:
                if call.id not in answered and call.id in pending_spawns:
                    results.append(
                        Message(role="tool", content=json.dumps(STILL_RUNNING), tool_call_id=call.id, name=call.name)
                    )
            messages.extend(results)
        calls, text, results = [], None, []

    for event in events:
        p = event.payload
        if event.actor == "user" and event.type in ("tool_call", "tool_result"):
            flush()
            if event.type == "tool_call":
                messages.append(_user_action("user_action", p.get("name", ""), json.dumps(p.get("input"))))
            else:
                messages.append(_user_action("user_action_result", p.get("name", ""), result_text(p)))
            continue
        if event.type == "message":
            flush()
            if p.get("role") == "assistant":
                text = str(p.get("content", ""))
            else:
                messages.append(Message(role="user", content=str(p.get("content", ""))))
        elif event.type == "tool_call":
            calls.append(ToolCall(id=p["id"], name=p["name"], arguments=p.get("input") or {}))
        elif event.type == "tool_result":
            call_id = p.get("toolCallId", "")
            if not any(c.id == call_id for c in calls):
                # A child's result that arrived after the conversation moved on (the user spoke while it ran): the
                # call was answered "still running" in its place, so the real result comes as a note of its own.
                flush()
                note = f"The result of your earlier {p.get('name', 'tool')} call {call_id} arrived:\n"
                messages.append(Message(role="user", content=note + bound(result_text(p))))
                continue
            answered.add(call_id)
            results.append(
                Message(role="tool", content=bound(result_text(p)), tool_call_id=call_id, name=p.get("name"))
            )
    flush()
    return messages
