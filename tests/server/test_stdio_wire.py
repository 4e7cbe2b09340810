"""The stdio wire's writer and reader (`server/stdio.py`): replies leave whole and in order whatever a sender's fate,
a request is owed until its reply's last byte is written, and a request split over many reads arrives whole."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from mcp_harness.server import stdio
from mcp_harness.server.stdio import _WireReader, _WireWriter  # pyright: ignore[reportPrivateUsage]
from mcp_harness.server.wire_calls import WireCalls

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    return r, w


def _drain(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def _frames(*frames: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(frame).encode() + b"\n" for frame in frames)


async def _read_to_end(*frames: dict[str, Any]) -> _WireWriter:
    """Feed `frames` and end the input; every one must reach the session, then the end. The writer, for its `owed`.
    The end-of-input grace is 60 s: a wait for a reply no one will send would meet the 10 s bound instead."""
    r, w = _pipe()
    writer = _WireWriter(w)
    reader = _WireReader(r, False, writer)
    os.write(w, _frames(*frames))
    os.close(w)
    with anyio.fail_after(10):
        for _ in frames:
            assert isinstance(await reader.receive(), SessionMessage)
        with pytest.raises(anyio.EndOfStream):
            await reader.receive()
    os.close(r)
    return writer


def _reply(ident: int, size: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=ident, result={"x": "a" * size}))


async def test_a_cancelled_sender_leaves_no_half_frame_and_replies_stay_in_order() -> None:
    r, w = _pipe()
    writer = _WireWriter(w)
    writer.owed |= {1, 2}
    wire = b""
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.flush_backlog)
        with anyio.move_on_after(0.1):  # the client cancelled the handler while its big reply was half written
            await writer.send(_reply(1, 300_000))
            await anyio.sleep(1)
        wire += _drain(r)
        assert writer.owed == {1, 2}  # not written in full yet: still owed
        await writer.send(_reply(2, 10))  # the next reply queues behind the rest of the first
        with anyio.fail_after(10):
            while writer.owed:
                wire += _drain(r)
                await anyio.sleep(0.01)
            await writer.drained()
        tg.cancel_scope.cancel()
    wire += _drain(r)
    lines = wire.split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["id"] for line in lines[:-1]] == [1, 2]
    os.close(r)
    os.close(w)


async def test_a_request_split_over_many_reads_arrives_whole() -> None:
    r, w = _pipe()
    writer = _WireWriter(w)
    reader = _WireReader(r, False, writer)
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
    request["params"]["arguments"] = {"text": "b" * 3_000_000}
    line = json.dumps(request).encode() + b"\n"
    got: list[object] = []

    async def feed() -> None:
        view = memoryview(line + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        while view:
            await anyio.wait_writable(w)
            try:
                view = view[os.write(w, view[:50_000]) :]
            except BlockingIOError:
                continue
        os.close(w)

    async with anyio.create_task_group() as tg:
        tg.start_soon(feed)
        got.append(await reader.receive())
        got.append(await reader.receive())  # the last line, unterminated at end of input
    first, second = got
    assert isinstance(first, SessionMessage) and isinstance(first.message, types.JSONRPCRequest)
    assert first.message.params is not None and len(first.message.params["arguments"]["text"]) == 3_000_000
    assert writer.owed == {7}
    assert isinstance(second, SessionMessage) and isinstance(second.message, types.JSONRPCNotification)
    os.close(r)


async def test_end_of_input_does_not_wait_for_a_reply_to_a_request_the_client_cancelled() -> None:
    writer = await _read_to_end(
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "slow", "arguments": {}}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}},
    )
    assert writer.owed == set()


async def test_a_cancellation_naming_no_request_is_ignored_and_reading_goes_on() -> None:
    # `requestId` as the SDK reads it: a list, an object or a bool names no request (and must not stop the reader).
    writer = await _read_to_end(
        {"jsonrpc": "2.0", "id": 5, "method": "ping"},
        *(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": odd}}
            for odd in ([1], {}, True, None)
        ),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "5"}},  # "5" is 5
    )
    assert writer.owed == set()


ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _calls(answer: Any) -> WireCalls:
    return WireCalls(answer, frozenset({"read"}), lambda: {}, lambda _caps: contextlib.nullcontext())


OPENING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "_meta": ENVELOPE}}


async def test_a_call_on_the_wire_cut_short_by_shutdown_gets_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As the SDK's dispatcher answers its own in-flight requests when the connection closes under them, though the
    # SDK's session, done first, has closed its end of the writer by then.
    monkeypatch.setattr(stdio, "EOF_GRACE_S", 0.3)
    started = anyio.Event()

    async def never(name: str, arguments: dict[str, object]) -> dict[str, object]:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    r, w = _pipe()
    out_r, out_w = _pipe()
    os.write(w, _frames(OPENING, CALL))
    os.close(w)  # end of input while the call runs: the grace runs out, the session ends
    server = Server("bare")
    with anyio.fail_after(10):
        async with stdio._wire(r, out_w, False, _calls(never)) as (reader, writer):  # pyright: ignore[reportPrivateUsage]
            await server.run(reader, writer, server.create_initialization_options())
    assert started.is_set()
    replies = {frame["id"]: frame for frame in map(json.loads, _drain(out_r).splitlines())}
    assert replies[2] == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "Connection closed"}}
    assert replies[1]["error"]["message"] == "Method not found"  # the SDK's own request: the bare SDK's answer
    for fd in (r, out_r, out_w):
        os.close(fd)


async def test_a_client_gone_mid_call_is_no_error(caplog: pytest.LogCaptureFixture) -> None:
    release = anyio.Event()

    async def slow(name: str, arguments: dict[str, object]) -> dict[str, object]:
        await release.wait()
        return {"content": [{"type": "text", "text": "late"}], "resultType": "complete"}

    r, w = _pipe()
    out_r, out_w = _pipe()
    os.write(w, _frames(OPENING, CALL))
    server = Server("bare")
    with anyio.fail_after(10), caplog.at_level(logging.WARNING):
        async with stdio._wire(r, out_w, False, _calls(slow)) as (reader, writer):  # pyright: ignore[reportPrivateUsage]
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, reader, writer, server.create_initialization_options())
                while 1 not in {json.loads(line)["id"] for line in _drain(out_r).splitlines()}:
                    await anyio.sleep(0.01)
                os.close(out_r)  # the client hangs up before the call's answer is ready
                release.set()
                await anyio.sleep(0.2)
                tg.cancel_scope.cancel()
    assert writer.broken and not [r for r in caplog.records if r.levelno >= logging.WARNING]
    for fd in (r, w, out_w):
        os.close(fd)


async def test_a_refused_line_carrying_a_live_requests_id_leaves_that_request_owed() -> None:
    r, w = _pipe()
    out_r, out_w = _pipe()
    writer = _WireWriter(out_w)
    reader = _WireReader(r, False, writer)
    broken = b'{"jsonrpc":"2.0","id":"slow","method":\n'  # a line the reader refuses, naming the ping's id
    os.write(w, _frames({"jsonrpc": "2.0", "id": "slow", "method": "ping"}) + broken)
    with anyio.fail_after(10):
        assert isinstance(await reader.receive(), SessionMessage)  # the ping, for the SDK
        with anyio.move_on_after(0.2):
            await reader.receive()  # the broken line is answered by the reader itself
    (refusal,) = [json.loads(line) for line in _drain(out_r).splitlines()]
    assert refusal["id"] == "slow" and refusal["error"]["code"] == -32600
    assert writer.owed == {"slow"}  # the refusal is no answer to the ping
    for fd in (r, w, out_r, out_w):
        os.close(fd)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"resultType": "complete"}, "no content: the sieve would pass it as another result type, emptied"),
        ({"content": [{"type": "text"}], "resultType": "complete"}, "a text block without its text"),
    ],
)
async def test_an_answer_that_is_not_a_call_result_is_an_internal_error_not_an_empty_reply(
    answer: dict[str, Any], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def handler(name: str, arguments: dict[str, object]) -> dict[str, Any]:
        return answer

    request = types.JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/call", params={"name": "read", "arguments": {}})
    with caplog.at_level(logging.ERROR):
        line = await _calls(handler).reply(request, "2026-07-28", {})
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "Handler returned an invalid result"},
    }, why
    assert any("not a" in r.getMessage() and "result" in r.getMessage() for r in caplog.records)
