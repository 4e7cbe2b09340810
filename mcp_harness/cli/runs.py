"""`mcp-harness runs`, `runs show ID` and `runs cancel ID`: watch and steer the durable runs of this data dir.

Everything is read from the database, so these commands see the runs a `serve` in another process is executing,
and `cancel` works across processes (see `run_queries.cancel_tree`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import anyio

from mcp_harness.cli import run_queries
from mcp_harness.cli._common import EXIT_FAILURE, command_flags, emit, fmt_time, opened, plural
from mcp_harness.errors import BadRequest, NotFound
from mcp_harness.runs.records import RunStatus
from mcp_harness.spaces.threads import JOURNAL_TAIL, journal_line, run_phrase
from mcp_harness.store._util import now_ms

if TYPE_CHECKING:
    from mcp_harness.harness import Harness
    from mcp_harness.runs.records import RunRecord


def register(sub: Any) -> None:
    runs = sub.add_parser(
        "runs",
        help="list runs newest first; `runs show ID`, `runs cancel ID`, `runs signal ID SIGNAL`",
        description="List runs, newest first, one per line: id, kind, status, title, agent, session, parent run, "
        "created, updated, total tokens (own and children's).",
    )
    runs.set_defaults(handler=_list)
    command_flags(runs)
    runs.add_argument("--session", help="only the runs on this session (and the scripts it started)")
    runs.add_argument(
        "--status", nargs="+", action="extend", choices=get_args(RunStatus), metavar="STATUS", help="only these"
    )
    runs.add_argument("--limit", type=int, default=25)
    actions = runs.add_subparsers(dest="action", required=False)
    show = actions.add_parser("show", help="a run: its tree, usage, plan, wait, error, output and journal tail")
    show.set_defaults(handler=_show)
    cancel = actions.add_parser("cancel", help="cancel a run and its live descendants (also one `serve` executes)")
    cancel.set_defaults(handler=_cancel)
    signal = actions.add_parser(
        "signal",
        help="deliver a signal to a script waiting in ctx.wait_for_event",
        description="Deliver SIGNAL (with an optional JSON payload) to the oldest wait of the run that accepts it: "
        "the script resumes with {source: 'signal', signal, payload?}. A `serve` in another process picks the run "
        "up within a second.",
        epilog="exit codes: 0 delivered; 1 no wait of the run accepts the signal; 2 usage; 3 no such run",
    )
    signal.set_defaults(handler=_signal)
    for leaf in (show, cancel, signal):
        leaf.add_argument("id", help="run id (see `mcp-harness runs`)")
        if leaf is signal:
            leaf.add_argument("signal", help="the signal's name, as the script's wait names it")
            leaf.add_argument("--payload", help="a JSON value the script receives as the delivery's payload")
        _leaf_flags(leaf)


def _leaf_flags(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: argparse copies a subcommand's defaults over what the parent parsed, which would drop the
    # `--data-dir` of `runs --data-dir D show ID`.
    parser.add_argument("--data-dir", type=Path, default=argparse.SUPPRESS, help="data directory")
    parser.add_argument("--config", type=Path, default=argparse.SUPPRESS, help="TOML config file")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON object")


def _list(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        if args.session:
            harness.sessions.get(args.session)
        found = run_queries.list_runs(
            harness, session_id=args.session, statuses=args.status or (), limit=max(1, args.limit)
        )
        names = _agent_names(harness)
    rows = [{**run.to_info(), "updatedAt": run.updated_at, "usageTotal": _total(run)} for run in found]
    lines = [
        "\t".join(
            [
                run.id,
                run.kind,
                run.status,
                run.title,
                names.get(run.agent_id or "", run.agent_id or "-"),
                run.session_id or "-",
                run.parent_run_id or "-",
                fmt_time(run.created_at),
                fmt_time(run.updated_at),
                str(_total(run)),
            ]
        )
        for run in found
    ]
    return emit(out, args, rows, "\n".join(lines) or "No runs.")


def _show(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        run = harness.runs.get(args.id)
        tree = _tree(harness, run)
        journal = harness.runs.journal(run.id) if run.kind == "workflow" else []
        plan = run.plan or (harness.sessions.get_plan(run.session_id) if run.session_id else None)
        wait = _wait_reason(harness, run)
        names = _agent_names(harness)
    data: dict[str, Any] = {
        **run.to_info(),
        "summary": f"Run {run.id} ({run.kind}) {run_phrase(run.status, run.error, run.attempt)}.",
        "elapsedMs": _elapsed(run),
        "usageRolledUp": _rolled_up(run),
        "tree": tree,
    }
    if plan:
        data["plan"] = plan
    if wait:
        data["waitReason"] = wait
    if journal:
        data["journalTail"], data["journalEntries"] = journal[-JOURNAL_TAIL:], len(journal)
    if getattr(args, "json", False):
        return emit(out, args, data, None)
    lines = [data["summary"], f"  title    {run.title}"]
    if run.agent_id:
        lines.append(f"  agent    {names.get(run.agent_id, run.agent_id)}")
    if run.session_id:
        lines.append(f"  session  {run.session_id}")
    if run.parent_run_id:
        lines.append(f"  parent   {run.parent_run_id} (root {run.root_run_id})")
    lines.append(f"  attempt  {run.attempt} of {run.max_attempts} · origin {run.origin} · queue {run.queue}")
    lines.append(f"  times    {_times(run)}")
    lines.append(f"  usage    {_usage_line(run)}")
    if wait:
        lines.append(f"  wait     {wait}")
    if run.error:
        lines.append(f"  error    {run.error.get('code')}: {run.error.get('message')}")
    if run.output is not None:
        lines.append(f"  output   {json.dumps(run.output, ensure_ascii=False)[:2000]}")
    if plan:
        from mcp_harness.verbs.plan import plan_markdown

        lines.append("  plan")
        lines += [f"    {line}" for line in plan_markdown(plan).splitlines() if line]
    lines.append("tree")
    lines += _tree_lines(tree, 1)
    if journal:
        shown = journal[-JOURNAL_TAIL:]
        lines.append(f"journal (last {len(shown)} of {len(journal)})")
        lines += [f"  {journal_line(entry)}" for entry in shown]
    print("\n".join(lines), file=out)
    return 0


def _cancel(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        canceled = anyio.run(run_queries.cancel_tree, harness, args.id)
    rows = [{"id": r.id, "kind": r.kind, "title": r.title, "was": r.status} for r in canceled]
    summary = f"Canceled {plural(len(rows), 'run')}." if rows else f"Nothing of run {args.id} was live any more."
    text = "\n".join([summary, *(f"  {r['id']}\t{r['kind']}\twas {r['was']}\t{r['title']}" for r in rows)])
    return emit(out, args, {"summary": summary, "canceled": rows}, text)


def _signal(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.runs import signals

    payload: Any = None
    if args.payload is not None:
        try:
            payload = json.loads(args.payload)
        except json.JSONDecodeError as exc:
            example = """--payload '{"ok": true}'"""
            raise BadRequest(f"--payload is not JSON ({exc.msg} at column {exc.colno}); e.g. {example}.") from None
    with opened(args) as harness:
        run = harness.runs.find(args.id)
        if run is None or run.account_id != harness.account_id:
            raise NotFound(signals.not_delivered(harness.runs, None, args.id, args.signal))
        delivered = signals.deliver_signal(
            harness.runs, account_id=harness.account_id, run_id=run.id, signal=args.signal, payload=payload
        )
        why = signals.not_delivered(harness.runs, run, args.id, args.signal) if delivered is None else None
    if why is not None:
        print(f"mcp-harness: {why}", file=sys.stderr)
        return EXIT_FAILURE
    summary = f"Delivered signal {args.signal!r} to run {args.id}; it resumes once an engine claims it."
    return emit(out, args, {"summary": summary, "delivered": True, "runId": args.id, "signal": args.signal}, summary)


# -- rendering ------------------------------------------------------------------------------------------------


def _agent_names(harness: Harness) -> dict[str, str]:
    return {a.id: a.definition.name for a in harness.agents.list(harness.account_id)}


def _total(run: RunRecord) -> int:
    return _rolled_up(run)["total"]


def _rolled_up(run: RunRecord) -> dict[str, int]:
    usage = run.usage or {}
    children = usage.get("children") or {}
    keys = ("input", "output", "cacheRead", "cacheWrite", "total")
    summed = {k: int(usage.get(k) or 0) + int(children.get(k) or 0) for k in keys}
    return {**summed, "runs": int(children.get("runs") or 0)}


def _usage_line(run: RunRecord) -> str:
    usage = run.usage or {}
    own = f"own {int(usage.get('total') or 0)} tokens (in {int(usage.get('input') or 0)}, "
    own += f"out {int(usage.get('output') or 0)})"
    rolled = _rolled_up(run)
    if not rolled["runs"]:
        return own
    return f"{own} · with children {rolled['total']} ({plural(rolled['runs'], 'child run')})"


def _elapsed(run: RunRecord) -> int | None:
    if run.started_at is None:
        return None
    return (run.finished_at or now_ms()) - run.started_at


def _seconds(ms: int | None) -> str:
    return "not started" if ms is None else f"{ms / 1000:.1f} s"


def _times(run: RunRecord) -> str:
    parts = [f"created {fmt_time(run.created_at)}"]
    if run.started_at:
        parts.append(f"started {fmt_time(run.started_at)}")
    if run.finished_at:
        parts.append(f"finished {fmt_time(run.finished_at)}")
    return " · ".join(parts) + f" · elapsed {_seconds(_elapsed(run))}"


def _tree(harness: Harness, run: RunRecord) -> dict[str, Any]:
    """The run and its descendants, nested, each with what `runs show` prints of it."""
    node: dict[str, Any] = {
        "id": run.id,
        "kind": run.kind,
        "status": run.status,
        "title": run.title,
        "elapsedMs": _elapsed(run),
        "children": [_tree(harness, child) for child in harness.runs.children(run.id)],
    }
    if run.error:
        node["error"] = {"code": run.error.get("code"), "message": run.error.get("message")}
    return node


def _tree_lines(node: dict[str, Any], level: int) -> list[str]:
    error = node.get("error")
    why = f" — {error['code']}: {error['message']}" if error and node["status"] == "failed" else ""
    line = f"{'  ' * level}{node['id']}  {node['kind']}  {node['status']}  {_seconds(node['elapsedMs'])}  "
    lines = [line + node["title"] + why]
    for child in node["children"]:
        lines += _tree_lines(child, level + 1)
    return lines


def _wait_reason(harness: Harness, run: RunRecord) -> str | None:
    """Why a run is not executing: the children or timer it waits on, or what holds it in the queue."""
    if run.status == "waiting":
        wait = run.wait or {}
        reason = wait.get("reason")
        if reason == "children":
            live = [c for c in harness.runs.children(run.id) if not c.terminal]
            return f"on {plural(len(live), 'child', 'children')}: " + ", ".join(f"{c.id} ({c.status})" for c in live)
        if reason == "timer" and isinstance(wait.get("wakeAt"), int):
            return f"on a timer until {fmt_time(wait['wakeAt'])}"
        return f"on {reason}" + (f" ({wait['label']})" if wait.get("label") else "")
    if run.status != "queued":
        return None
    if run.not_before is not None and run.not_before > now_ms():
        last = f" after {run.error.get('code')}: {run.error.get('message')}" if run.error else ""
        return f"queued: retry {run.attempt + 1} not before {fmt_time(run.not_before)}{last}"
    live = harness.runs.live_on_session(run.session_id) if run.session_id and run.kind == "agent" else []
    turn = next((r.id for r in live if r.status in ("claimed", "running")), None)
    if turn is not None:
        return f"queued behind run {turn}, the live turn of its session"
    return "queued: waiting for an engine to claim it (`mcp-harness serve` or `chat` executes runs)"
