"""Sampling in the 2026-07-28 protocol: a delegate call's tree asks the client's model through input requests on
that call (SEP-2322 multi round-trip requests).

A stateless request can be sent no `sampling/createMessage` of its own, so the open `delegate` call carries them.
While a run under the call waits on a model reply, the call answers `InputRequiredResult` with every waiting request;
the client re-sends the call with `inputResponses` and the echoed `requestState`; each response goes to the turn
waiting on it, and the call waits again — for the next requests or the child's result. Each round is a request of
its own, so the delegate itself runs in a task of the server's lifespan, not in a round's handler.

The request state is sealed by the SDK (`RequestStateBoundary`: AES-GCM, bound to the tool call's arguments and to
the caller's token) and names the call and, per key, the run that asked. On SQLite the key is this process's: one
process holds every call, so a state outliving it fails at the seal. On PostgreSQL every replica of the store shares
one key (`store_meta`), and a round reaching a replica that does not hold its call is relayed to the holder through
the store (`mrtr_relay.py`). It is checked
again here against the caller's session. Only requests still waiting take a response, so a stale one (a turn that
timed out and asked again, a replayed round, a restart) is never fed into another turn: it is ignored, or after a
restart the state no longer unseals.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

from mcp_harness.errors import HarnessError
from mcp_harness.server.client_calls import CallTrees, ClientCall, VerbOutcome
from mcp_harness.server.mrtr_relay import Relay, RemoteCall
from mcp_harness.server.transports import TOKEN_SCOPE_KEY
from mcp_harness.store import store_meta
from mcp_harness.store.db import Database

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from mcp.server.context import ServerRequestContext

    from mcp_harness.binding import SessionBinding
    from mcp_harness.harness import Harness
    from mcp_harness.verbs.base import Progress, VerbContext

logger = logging.getLogger(__name__)

SETTLE_S = 1.0
"""Once a request waits, how long its round may wait for the tree's other running turns to ask too: one round then
carries them all, and clients cap a call's rounds (the SDK at 10, `input_required_max_rounds`)."""
QUIET_POLL_S = 0.05
STATE_TTL_S = 3600.0
"""How long a round's state stays valid. Longer than a turn's wait for its reply (`SamplingClient`), so a client
that comes back late still reaches the call — and its result, once the turn has failed or retried."""
GONE = "This delegate call is no longer open here (it ended, or the server restarted); delegate again."
STATE_KEY = "mrtr_request_state_key"
"""The `store_meta` key of the request-state key the replicas of a PostgreSQL store share."""


def _token_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    token = getattr(ctx.request, "scope", {}).get(TOKEN_SCOPE_KEY)
    return token.hash if token is not None else None


class ClientCalls:
    """The open delegate calls of one harness, shared by every server built on it."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self.calls: dict[str, ClientCall] = {}
        # SQLite: a key of this process only, since a state outlives neither it nor its calls (in its memory only).
        # PostgreSQL: the key of the store, so that any replica unseals a round and relays it to the call's holder.
        shared = not isinstance(harness.db, Database)
        key = store_meta.shared_key(harness.db, STATE_KEY) if shared else os.urandom(32)
        self.relay = Relay(harness.db) if shared else None
        self.security = RequestStateSecurity(keys=[key], ttl=STATE_TTL_S, bind_principal=_token_of)
        self.trees = CallTrees(harness)

    def boundary(self) -> RequestStateBoundary:
        return RequestStateBoundary(self.security, default_audience="mcp-harness")

    # -- the sampling side ---------------------------------------------------------------------------------------

    async def route(self, session_id: str) -> tuple[ClientCall | RemoteCall, str] | None:
        """The open call whose tree the run now on `session_id` belongs to, with that run's id; None if none. On
        PostgreSQL the call may be held by another replica (this one's engine claimed the run)."""
        if not session_id or (not self.calls and self.relay is None):
            return None
        found = await self.harness.engine.offload(self.trees.of_session, session_id)
        if found is None:
            return None
        run_id, root_id, call_id = found
        call = self.calls.get(call_id)
        if call is None:
            remote = None if self.relay is None else await self.relay.remote(call_id)
            return None if remote is None else (remote, run_id)
        call.root_run_id = root_id
        return call, run_id

    # -- the call side -------------------------------------------------------------------------------------------

    async def delegate(
        self,
        ctx: ServerRequestContext[Any, Any],
        binding: SessionBinding,
        arguments: dict[str, Any],
        params: types.CallToolRequestParams,
        report: Progress,
        *,
        can_sample: bool,
        tg: TaskGroup | None,
    ) -> VerbOutcome | types.InputRequiredResult:
        """One round of a `delegate` call: the first (spawn) or a retry (answer), then wait for what comes next."""
        try:
            verb_ctx = await binding.context()
        except HarnessError as exc:
            return None, exc
        owner = (_token_of(ctx), verb_ctx.session_id)
        if params.request_state is not None:
            call_id, asked = self._resume(params.request_state)
            call = self.calls.get(call_id)
            if call is None and self.relay is not None:  # held by another replica: relayed through the store
                relayed = await self.relay.round(call_id, owner, asked, params.input_responses or {})
                if relayed is None:
                    raise MCPError(types.INVALID_PARAMS, GONE)
                return relayed
            if call is None or call.owner != owner:  # the same answer for someone else's call as for a gone one
                raise MCPError(types.INVALID_PARAMS, GONE)
            self.answer(call, asked, params.input_responses or {})
            return await self._local_round(call, report)
        self._purge()
        call = ClientCall(owner=owner, can_sample=can_sample)
        self.calls[call.id] = call
        if not can_sample or tg is None:
            # Nothing can ask the client anything: the call stays in its handler, registered only so a turn under it
            # that needs the client's model is told why it cannot have it.
            try:
                return await self._invoke_inline(call, verb_ctx, arguments, report)
            finally:
                self.calls.pop(call.id, None)
        if self.relay is not None:
            try:
                await self.relay.hold(call, STATE_TTL_S)  # before any state naming the call leaves this replica
            except BaseException:
                self.calls.pop(call.id, None)
                raise
            tg.start_soon(self.relay.watch, self, call)
        tg.start_soon(self._invoke, call, dataclasses.replace(verb_ctx, progress=call.forward), arguments)
        return await self._local_round(call, report)

    async def _local_round(self, call: ClientCall, report: Progress) -> VerbOutcome | types.InputRequiredResult:
        answer = await self.run_round(call, report)
        if self.relay is not None and not isinstance(answer, types.InputRequiredResult):
            await self.relay.drop(call.id)  # its outcome is delivered: no replica needs the call's row any more
        return answer

    async def _invoke_inline(
        self, call: ClientCall, verb_ctx: VerbContext, arguments: dict[str, Any], report: Progress
    ) -> VerbOutcome:
        return await self.harness.invoke_async(
            dataclasses.replace(verb_ctx, progress=report), "delegate", arguments, call_id=call.id
        )

    async def _invoke(self, call: ClientCall, verb_ctx: VerbContext, arguments: dict[str, Any]) -> None:
        try:
            with call.scope:
                call.outcome = await self.harness.invoke_async(verb_ctx, "delegate", arguments, call_id=call.id)
        except Exception as exc:  # this task is the delegate's top level: a bug becomes the call's refusal
            logger.exception("delegate call %s failed", call.id)
            call.outcome = (None, HarnessError(f"delegate failed: {type(exc).__name__}."))
        finally:
            call.ended_at = anyio.current_time()
            call.finished.set()
            call.notify()

    @staticmethod
    def _resume(state: str) -> tuple[str, dict[str, str]]:
        try:
            decoded = json.loads(state)
            return str(decoded["call"]), {str(k): str(v) for k, v in dict(decoded["asked"]).items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise MCPError(types.INVALID_PARAMS, GONE) from None

    @staticmethod
    def answer(call: ClientCall, asked: dict[str, str], responses: dict[str, Any]) -> None:
        """Hand each response to the turn still waiting on that key, and on that run; a request left unanswered is
        asked again next round (SEP-2322 error handling). Anything else is ignored."""
        for key, run_id in asked.items():
            pending = call.pending.get(key)
            if pending is None or pending.run_id != run_id or not pending.sent or pending.answered.is_set():
                continue
            response = responses.get(key)
            if isinstance(response, types.CreateMessageResult | types.CreateMessageResultWithTools):
                pending.answer = response
                pending.answered.set()
            else:
                pending.sent = False

    async def run_round(self, call: ClientCall, report: Progress | None) -> VerbOutcome | types.InputRequiredResult:
        """Wait for what the call's client is to get next (`report`: its progress, None for a relayed round)."""
        call.round += 1
        mine = call.round
        call.report = report
        call.notify()  # an older round still open (a client's duplicate retry) now hands over to this one
        try:
            await self._settle(call, mine)
        except anyio.get_cancelled_exc_class():
            # The client cancelled the round it has open: that cancels the call, and with it the child's tree.
            with anyio.CancelScope(shield=True):
                if call.round == mine:
                    call.scope.cancel()
                    await call.finished.wait()
                    self.calls.pop(call.id, None)
            raise
        finally:
            if call.round == mine:
                call.report = None
        if call.finished.is_set():
            self.calls.pop(call.id, None)
            return call.outcome or (None, HarnessError("The delegate call was canceled."))
        if call.round != mine:  # a newer round of this call took over: this one only tells its client to retry
            return types.InputRequiredResult(request_state=self._state(call, {}))
        asking = {key: p for key, p in call.pending.items() if not p.sent}
        for p in asking.values():
            p.sent = True
        requests: dict[str, types.InputRequest] = {key: p.request for key, p in asking.items()}
        asked = {key: p.run_id for key, p in asking.items()}
        return types.InputRequiredResult(input_requests=requests, request_state=self._state(call, asked))

    async def _settle(self, call: ClientCall, mine: int) -> None:
        """Until the child resolves, or requests wait and the round should carry them: once every running turn of
        the tree is waiting on a reply, or `SETTLE_S` after the first one asked."""
        first_at: float | None = None
        while True:
            changed = call.changed  # taken before the checks, so a change during them still wakes this
            if call.finished.is_set() or call.round != mine:
                return
            if not any(not p.sent for p in call.pending.values()):
                first_at = None
                await changed.wait()
                continue
            now = anyio.current_time()
            first_at = now if first_at is None else first_at
            waiting = {p.run_id for p in call.pending.values()}
            if now - first_at >= SETTLE_S or await self.trees.all_waiting(call.root_run_id, waiting):
                return
            with anyio.move_on_after(QUIET_POLL_S):
                await changed.wait()

    @staticmethod
    def _state(call: ClientCall, asked: dict[str, str]) -> str:
        return json.dumps({"call": call.id, "asked": asked}, separators=(",", ":"))

    def _purge(self) -> None:
        """Forget calls that ended longer ago than any state naming them stays valid."""
        now = anyio.current_time()
        for call_id, call in list(self.calls.items()):
            if call.ended_at is not None and now - call.ended_at > STATE_TTL_S:
                del self.calls[call_id]
