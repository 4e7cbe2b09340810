"""`mcp-harness chat [--agent A] [--session S] [MESSAGE]` (alias `send`): talk to an agent from the terminal.

Each message is appended to the session as actor `user` and a server-run turn of the agent is queued on it, in one
transaction; then the session's new events (the agent's replies, its tool calls and their results) are printed as
they are appended, until that turn's run ends. Without MESSAGE, every line of stdin is one turn, until EOF.

This process runs the engine itself (`Harness.engine_running`) for as long as it chats, so a turn executes with no
`serve` around. A `serve` on the same data dir at the same time is fine: both engines claim queued runs, and a claim
is one `BEGIN IMMEDIATE` transaction that moves a row from `queued` to `running` under the claimer's lease
(`RunStore.claim_batch`), so two engines can never claim, and so never execute, the same run. Whichever engine
claims this turn executes it; this process follows the turn through the database either way. The boot sweep of
this engine requeues only the runs of instances that are gone, never those of a live `serve`. Because this engine
may also claim other queued work of the data dir, it stops claiming once the chat is over and waits for what it
has started (an execution cut off here would stay `running` until some process boots again). Ctrl-C cancels the
turn in progress (its whole tree), so nothing of it is left for a later boot to resume.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from mcp_harness.cli._common import EXIT_FAILURE, command_flags, emit, opened
from mcp_harness.cli.sessions import event_row, events_after
from mcp_harness.errors import BadRequest, Conflict, HarnessError, NotFound
from mcp_harness.scope import Scope

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.runs.records import RunRecord
    from mcp_harness.store.agents import AgentRecord
    from mcp_harness.store.sessions import EventRecord, SessionRecord

POLL_S = 0.1
"""How often the turn's progress is read from the database (it may be executing in another process)."""
TURN_ATTEMPTS = 3
"""A turn retries retryable provider failures as a delegated child does (`delegate.CHILD_MAX_ATTEMPTS`)."""


def register(sub: Any) -> None:
    chat = sub.add_parser(
        "chat",
        aliases=["send"],
        help="send a message to an agent and print its turn as it happens",
        description="Append MESSAGE to a session as the user (a new conversation of the agent without --session), "
        "run the agent's turn on its model provider, and print the session's new events until the turn ends. "
        "Without MESSAGE, each line of stdin is one turn, until EOF. --json prints the new events as one array at "
        "the end. Exit 1 when a turn failed.",
    )
    chat.set_defaults(handler=_chat_command)
    command_flags(chat)
    chat.add_argument("--agent", help="agent name or id (default: the session's agent, else the configured agent)")
    chat.add_argument("--session", help="continue this session (see `mcp-harness sessions`)")
    chat.add_argument("message", nargs="?", help="the message; omit it to read one message per line from stdin")


class _Chat:
    """One chat: its agent, its session (created on the first turn when not given), and what it printed."""

    def __init__(self, harness: Harness, args: argparse.Namespace, out: Any) -> None:
        self.harness = harness
        self.args = args
        self.out = out
        self.agent: AgentRecord | None = None
        self.session: SessionRecord | None = None
        self.shown: list[EventRecord] = []
        self.failed = False

    def resolve(self) -> None:
        """The agent and, with --session, the session. Blocking."""
        h, args = self.harness, self.args
        if args.session:
            self.session = h.sessions.get(args.session)
            self.agent = h.agents.get(self.session.agent_id)
            if args.agent and args.agent not in (self.agent.id, self.agent.definition.name):
                raise BadRequest(
                    f"Session {self.session.id} belongs to agent {self.agent.definition.name!r}, not {args.agent!r}; "
                    "drop --agent or pick another session."
                )
        elif args.agent:
            found = h.agents.find(h.account_id, args.agent)
            if found is None:
                raise NotFound(f"No agent named {args.agent!r}. `mcp-harness agent list` shows them.")
            self.agent = found
        else:
            self.agent = h.agent()

    def enqueue(self, text: str) -> tuple[int, RunRecord]:
        """The user's message and the agent's turn, in one transaction. Blocking.

        Raises:
            Conflict: a run of the session is still live (one turn at a time, and a parked turn resumes by itself).
        """
        from mcp_harness.verbs.delegate import title_of

        h = self.harness
        assert self.agent is not None
        created = self.session is None
        with h.db.transaction():
            if self.session is None:
                title = title_of({"input": text}, "Chat")
                self.session = h.sessions.create(h.account_id, self.agent.id, kind="conversation", title=title)
            live = h.runs.live_on_session(self.session.id)
            if live:
                raise Conflict(
                    f"The agent is working in this thread right now (run {live[0].id} is {live[0].status}); wait "
                    f"for it, or stop it with `mcp-harness runs cancel {live[0].id}`."
                )
            message = {"type": "message", "role": "user", "content": text}
            event = h.sessions.append(self.session.id, message, "user")
            run = h.runs.enqueue(
                account_id=h.account_id,
                kind="agent",
                title=title_of({"input": text}, "Chat turn"),
                origin="user",
                agent_id=self.agent.id,
                session_id=self.session.id,
                input=Scope(h.account_id).for_run(),
                queue="interactive",
                max_attempts=TURN_ATTEMPTS,
            )
        if created:
            print(f"Session {self.session.id} with agent {self.agent.definition.name}", file=sys.stderr)
        self.shown.append(event)
        return event.seq, run

    async def turn(self, text: str) -> None:
        await self.follow(*await anyio.to_thread.run_sync(self.enqueue, text))

    async def follow(self, seq: int, run: RunRecord) -> None:
        """Print the session's events after `seq` until the turn's run is terminal; Ctrl-C cancels its tree."""
        h = self.harness
        h.engine.wake()
        try:
            while True:
                # The run before the events: whatever the turn appended before it ended is printed below.
                current = await anyio.to_thread.run_sync(h.runs.get, run.id)
                assert self.session is not None
                new = await anyio.to_thread.run_sync(events_after, h, self.session.id, seq)
                for event in new:
                    self.print(event)
                seq = new[-1].seq if new else seq
                self.shown += new
                if current.terminal:
                    break
                await anyio.sleep(POLL_S)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await h.engine.cancel(run.id)
            raise
        if current.status != "succeeded":
            from mcp_harness.spaces.threads import run_phrase

            self.failed = True
            print(
                f"mcp-harness: run {run.id} {run_phrase(current.status, current.error, current.attempt)}",
                file=sys.stderr,
            )

    def print(self, event: EventRecord) -> None:
        from mcp_harness.spaces.threads import render_event

        if self.args.json:
            return
        p = event.payload
        if event.type == "message":
            if p.get("content"):
                print(f"{p.get('role', event.actor)}: {p['content']}", file=self.out)
        else:
            print(f"  {render_event(event)}", file=self.out)
        self.out.flush()


async def _chat(harness: Harness, args: argparse.Namespace, out: Any) -> int:
    chat = _Chat(harness, args, out)
    await anyio.to_thread.run_sync(chat.resolve)
    first = None
    if args.message is not None:
        if not args.message.strip():
            raise BadRequest("The message is empty; say something, or omit it to read lines from stdin.")
        # Queued before this engine starts, so a refusal leaves nothing behind and nothing was claimed for it.
        first = await anyio.to_thread.run_sync(chat.enqueue, args.message)
    refused: HarnessError | None = None
    async with harness.engine_running():
        try:
            if first is not None:
                await chat.follow(*first)
            else:
                while (line := await anyio.to_thread.run_sync(_read_line, abandon_on_cancel=True)) is not None:
                    if line.strip():
                        await chat.turn(line.rstrip("\n"))
        except HarnessError as exc:
            refused = exc  # raised below, outside the engine's task group (which would wrap it in a group)
        await _drain(harness)  # not on Ctrl-C: that stops this process now, and the next boot requeues the rest
    if refused is not None:
        raise refused
    if args.json:
        emit(out, args, [event_row(e) for e in chat.shown], None)
    return EXIT_FAILURE if chat.failed else 0


def _read_line() -> str | None:
    if sys.stdin.isatty():
        print("> ", end="", file=sys.stderr, flush=True)
    line = sys.stdin.readline()
    return line or None


async def _drain(harness: Harness) -> None:
    """Stop claiming, then let what this engine executes park or finish: cut off on exit, a run would stay
    `running` under a lease nobody renews until a process boots and sweeps it. A run already terminal in the
    database (canceled from another process) is not waited for: whatever its execution still returns is discarded.
    """
    engine = harness.engine
    engine.limits = dict.fromkeys(engine.limits, 0)

    def executing() -> bool:
        return any((run := harness.runs.find(rid)) is not None and not run.terminal for rid in engine.running_ids())

    while await anyio.to_thread.run_sync(executing):
        await anyio.sleep(POLL_S)


def _chat_command(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        return anyio.run(_chat, harness, args, out)
