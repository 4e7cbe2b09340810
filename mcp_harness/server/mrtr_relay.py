"""2026-07-28 `delegate` rounds across replicas (issue 21: stateless MCP behind a load balancer).

A call lives in the memory of the replica that started it, the holder (`mrtr.py`). On PostgreSQL its client's next
round may land on any replica, so the holder keeps a row per open call (store/mrtr_relay.py) and watches it: a
replica that gets a round of a call it does not hold checks the caller against the row, writes the round's input
responses there and waits; the holder hands them to its waiting turns exactly as a local round's, runs the round,
and writes what it would have answered (the next input requests with their plain state, or the outcome); the other
replica answers its own round from that, sealing the state under the key every replica of the store shares.

A turn of the call's tree that runs here while the call is held elsewhere (this replica's engine claimed its run)
asks through the store as well (`RemoteCall`): the holder asks its request in its next round, as one of its own.

Polling, not hints: the holder reads its row every `POLL_S` while the call is open, and beats every `BEAT_S`; a
relayed round whose holder has not beaten for `LOST_S` reads like a gone call (the holder's replica went away).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types

from mcp_harness.errors import HarnessError
from mcp_harness.store._util import new_id, now_ms
from mcp_harness.store.mrtr_relay import RelayRow, RelayStore
from mcp_harness.verbs.base import VerbResult

if TYPE_CHECKING:
    from mcp_harness.server.client_calls import Answer, ClientCall, VerbOutcome
    from mcp_harness.server.mrtr import ClientCalls
    from mcp_harness.store.port import Store

logger = logging.getLogger(__name__)
T = TypeVar("T")

POLL_S = 0.1
BEAT_S = 2.0
LOST_S = 10.0
"""Longer than a few missed beats: a holder busy on a slow database is not taken for gone."""
CANCELED = "The delegate call was canceled."


async def _off(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(fn, *args)


class Relay:
    """The store side of one harness's open calls, on PostgreSQL."""

    def __init__(self, db: Store) -> None:
        self.store = RelayStore(db)

    # -- the holder ----------------------------------------------------------------------------------------------

    async def hold(self, call: ClientCall, ttl_s: float) -> None:
        """Record a new call (and forget those whose holder stopped beating longer ago than a state lives)."""
        await _off(self.store.purge, int(ttl_s * 1000))
        await _off(self.store.open, call.id, _owner(call.owner))

    async def watch(self, calls: ClientCalls, call: ClientCall) -> None:
        """While `call` is open: beat, and serve each round relayed to it; then record its outcome."""
        seen, beat_at = 0, anyio.current_time()
        proxied: dict[str, anyio.CancelScope] = {}
        answered: set[str] = set()
        try:
            async with anyio.create_task_group() as rounds:
                while not call.finished.is_set():
                    with anyio.move_on_after(POLL_S):
                        await call.finished.wait()
                    if call.finished.is_set():
                        break
                    try:
                        if anyio.current_time() - beat_at >= BEAT_S:
                            beat_at = anyio.current_time()
                            await _off(self.store.beat, [call.id])
                        row = await _off(self.store.get, call.id)
                        asks = await _off(self.store.open_asks, call.id)
                    except Exception:  # the store is away for a moment: the call goes on, the next poll retries
                        logger.warning("could not read the relay of delegate call %s", call.id, exc_info=True)
                        continue
                    if row is not None and row.seq > seen and row.inbox is not None:
                        seen = row.seq
                        rounds.start_soon(self._serve, calls, call, json.loads(row.inbox))
                    for ask_id, run_id, request in asks:
                        if ask_id not in proxied:
                            proxied[ask_id] = anyio.CancelScope()
                            rounds.start_soon(self._proxy, call, ask_id, run_id, request, proxied[ask_id], answered)
                    still = {ask[0] for ask in asks} | answered
                    for ask_id in [a for a in proxied if a not in still]:  # its turn stopped waiting: so does ours
                        proxied.pop(ask_id).cancel()
                rounds.cancel_scope.cancel()  # what still waits on the call ends with it
        finally:
            with anyio.CancelScope(shield=True):  # a holder stopping still tells the waiting replicas
                try:
                    await _off(
                        self.store.finish, call.id, _dump_outcome(call.outcome or (None, HarnessError(CANCELED)))
                    )
                except Exception:  # the other replicas then find the holder lost
                    logger.warning("could not record the outcome of delegate call %s", call.id, exc_info=True)

    async def _serve(self, calls: ClientCalls, call: ClientCall, inbox: dict[str, Any]) -> None:
        """One relayed round, run here as a local one. A failure is logged, never the watcher's: the other replica's
        round then ends as its client's timeout or a later retry decides, and the call goes on."""
        if inbox.get("cancel"):
            call.scope.cancel()
            return
        try:
            calls.answer(call, dict(inbox["asked"]), _load_responses(inbox["responses"]))
            answer = await calls.run_round(call, None)
            if isinstance(answer, types.InputRequiredResult):
                requests = {
                    k: r.model_dump(mode="json", by_alias=True) for k, r in (answer.input_requests or {}).items()
                }
                out: dict[str, Any] = {"seq": inbox["seq"], "state": answer.request_state, "requests": requests}
            else:
                out = {"seq": inbox["seq"], "outcome": _dump_outcome(answer)}
            await _off(self.store.reply, call.id, int(inbox["seq"]), json.dumps(out))
        except Exception:
            logger.exception("relayed round %s of delegate call %s failed", inbox.get("seq"), call.id)

    async def _proxy(
        self,
        call: ClientCall,
        ask_id: str,
        run_id: str,
        request: str,
        scope: anyio.CancelScope,
        answered: set[str],
    ) -> None:
        with scope:
            try:
                answer = await call.ask(run_id, types.CreateMessageRequest.model_validate_json(request))
                answered.add(ask_id)
                await _off(self.store.answer, ask_id, json.dumps(_dump_answer(answer)))
            except Exception:  # the turn on the other replica then waits out its own bound
                logger.exception("could not relay the answer to ask %s of delegate call %s", ask_id, call.id)

    async def drop(self, call_id: str) -> None:
        await _off(self.store.drop, call_id)

    async def remote(self, call_id: str) -> RemoteCall | None:
        """The call as a turn running here reaches it, if another replica holds it open."""
        row = await _off(self.store.get, call_id)
        return None if row is None or row.outcome is not None or _lost(row) else RemoteCall(self.store, call_id)

    # -- another replica -----------------------------------------------------------------------------------------

    async def round(
        self, call_id: str, owner: tuple[str | None, str | None], asked: dict[str, str], responses: dict[str, Any]
    ) -> VerbOutcome | types.InputRequiredResult | None:
        """A round of a call held elsewhere, relayed through the store; None when it is gone (or not the caller's)."""
        row = await _off(self.store.get, call_id)
        if row is None or row.owner != _owner(owner):  # someone else's call reads like a gone one
            return None
        if row.outcome is not None:
            await self.drop(call_id)
            return _load_outcome(row.outcome)
        if _lost(row):
            return None
        dumped = _dump_responses(responses)
        seq = await _off(
            self.store.post, call_id, lambda s: json.dumps({"seq": s, "asked": asked, "responses": dumped})
        )
        if seq is None:
            return None
        try:
            return await self._await_reply(call_id, seq)
        except anyio.get_cancelled_exc_class():
            # The client cancelled this round: as with a local one, that cancels the call.
            with anyio.CancelScope(shield=True):
                await _off(self.store.post, call_id, lambda s: json.dumps({"seq": s, "cancel": True}))
            raise

    async def _await_reply(self, call_id: str, seq: int) -> VerbOutcome | types.InputRequiredResult | None:
        # As long as a local round would wait (the child's next requests or its result); a holder gone silent ends
        # it (`_lost`), and a newer round's number ends it (the holder answers only the newest: `RelayStore.reply`).
        while True:
            await anyio.sleep(POLL_S)
            row = await _off(self.store.get, call_id)
            if row is None:
                return None
            out = json.loads(row.outbox) if row.outbox is not None else None
            if out is not None and out["seq"] == seq:
                if "outcome" in out:
                    await self.drop(call_id)
                    return _load_outcome(out["outcome"])
                requests: dict[str, types.InputRequest] = {
                    k: types.CreateMessageRequest.model_validate(r) for k, r in out["requests"].items()
                }
                return types.InputRequiredResult(input_requests=requests or None, request_state=out["state"])
            if row.seq > seq:  # a newer round of this call took over: this one only tells its client to retry
                return types.InputRequiredResult(request_state=_state(call_id))
            if row.outcome is not None:
                await self.drop(call_id)
                return _load_outcome(row.outcome)
            if _lost(row):
                return None


class RemoteCall:
    """A call another replica holds, as a turn running here asks it (`ClientCall.ask`'s counterpart). Only calls
    that can sample are held open across rounds, so this one can."""

    can_sample = True

    def __init__(self, store: RelayStore, call_id: str) -> None:
        self.store = store
        self.call_id = call_id

    async def ask(self, run_id: str, request: types.CreateMessageRequest) -> Answer:
        """Wait for the answer the holder writes back. The caller bounds the wait; however it ends, the ask goes."""
        ask_id = new_id()
        await _off(self.store.ask, ask_id, self.call_id, run_id, request.model_dump_json(by_alias=True))
        try:
            while True:
                await anyio.sleep(POLL_S)
                found = await _off(self.store.answer_of, ask_id)
                if found is not None:
                    return _load_answer(json.loads(found))
        finally:
            with anyio.CancelScope(shield=True):
                await _off(self.store.drop_ask, ask_id)


def _lost(row: RelayRow) -> bool:
    return now_ms() - row.held_at > LOST_S * 1000


def _owner(owner: tuple[str | None, str | None]) -> str:
    return json.dumps(list(owner))


def _state(call_id: str) -> str:
    return json.dumps({"call": call_id, "asked": {}}, separators=(",", ":"))


def _dump_responses(responses: dict[str, Any]) -> dict[str, Any]:
    """Only model replies are carried (anything else leaves its request unanswered, to be asked again)."""
    return {
        key: _dump_answer(response)
        for key, response in responses.items()
        if isinstance(response, types.CreateMessageResult | types.CreateMessageResultWithTools)
    }


def _load_responses(dumped: dict[str, Any]) -> dict[str, Any]:
    return {key: _load_answer(item) for key, item in dumped.items()}


def _dump_answer(answer: Answer) -> dict[str, Any]:
    tools = isinstance(answer, types.CreateMessageResultWithTools)
    return {"tools": tools, "value": answer.model_dump(mode="json", by_alias=True)}


def _load_answer(item: dict[str, Any]) -> Answer:
    kind = types.CreateMessageResultWithTools if item["tools"] else types.CreateMessageResult
    return kind.model_validate(item["value"])


def _dump_outcome(outcome: VerbOutcome) -> str:
    result, error = outcome
    return json.dumps(
        {
            "result": None
            if result is None
            else {"data": result.data, "text": result.text, "meta": result.meta, "isError": result.is_error},
            "error": None if error is None else {"code": error.code, "message": error.message},
        },
        default=str,
    )


def _load_outcome(text: str) -> VerbOutcome:
    found = json.loads(text)
    result, error = found["result"], found["error"]
    verb = (
        None
        if result is None
        else VerbResult(result["data"], result["text"], meta=result["meta"], is_error=result["isError"])
    )
    return verb, None if error is None else _error(error["code"], error["message"])


def _error(code: str, message: str) -> HarnessError:
    """The refusal as the holder's own class, so the wire shows the same code and status."""
    todo: list[type[HarnessError]] = [HarnessError]
    while todo:
        cls = todo.pop()
        if cls.code == code:
            try:
                return cls(message)
            except TypeError:  # a class whose constructor takes more than a message
                break
        todo += cls.__subclasses__()
    return HarnessError(message)


__all__ = ["Relay", "RemoteCall"]
