"""`mcp-harness hm push|pull|status`: the embedded Seed node's exchange with `[[hypermedia.servers]]` (issue 19).

`push` delivers what the push queue owes now, ignoring backoff (and puts back what a server refused); with a
document, it first owes that document's every blob to each configured server, auto-push or not. `pull` fetches a
document and its comments, verified, as `read hm://` does for a document this node lacks. `status` shows what is
pending where. Exit codes: 0 when done (nothing left pending for the servers pushed to), 1 when some push failed and
stays queued, 3 when no server has the document pulled, 2 for a bad address or a blob that failed verification.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp_harness.cli._common import EXIT_FAILURE, EXIT_OK, command_flags, emit, fmt_time, opened, plural
from mcp_harness.errors import BadRequest, NotFound


def register(sub: Any) -> None:
    hm = sub.add_parser(
        "hm",
        help="push to and pull from the Seed servers of [[hypermedia.servers]]",
        description="The embedded hypermedia node on the Seed network: push what it signed, pull what others "
        "signed (verified before it is stored), and see what is still owed to each server.",
    )
    commands = hm.add_subparsers(dest="hm_command", required=True)
    push = commands.add_parser("push", help="deliver the push queue now (and owe a document's blobs first)")
    command_flags(push)
    push.add_argument("document", nargs="?", help="hm://<account>/<path>: owe this document's blobs again first")
    push.add_argument("--server", help="only this server (its url as configured)")
    push.set_defaults(handler=_push)
    pull = commands.add_parser("pull", help="fetch a document and its comments from the configured servers")
    command_flags(pull)
    pull.add_argument("document", help="hm://<account>/<path>")
    pull.set_defaults(handler=_pull)
    status = commands.add_parser("status", help="what each server is still owed")
    command_flags(status)
    status.set_defaults(handler=_status)


def _address(text: str) -> tuple[str, str]:
    from mcp_harness.hypermedia.ids import parse_hm_id
    from mcp_harness.spaces.hm.common import path_of

    address = parse_hm_id(text)
    if address.version or address.block_ref:
        raise BadRequest(f"hm push and pull take a document address without ?v= or #block: hm://{address.uid}/…")
    return address.uid, path_of(address)


def _servers(harness: Any, only: str | None) -> list[Any]:
    servers = list(harness.settings.hypermedia.servers)
    if not servers:
        raise NotFound("No Seed servers are configured: add a [[hypermedia.servers]] entry (url, token_secret).")
    if only is not None:
        chosen = [s for s in servers if s.url.rstrip("/") == only.rstrip("/")]
        if not chosen:
            raise NotFound(f"--server {only} is not configured; configured: {', '.join(s.url for s in servers)}.")
        return chosen
    return servers


def _push(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.hypermedia.sync.collect import document_items, retry_refused

    with opened(args) as harness:
        servers = _servers(harness, args.server)
        sync = harness.sync
        queued = 0
        if args.document:
            space, path = _address(args.document)
            queued = sync.queue.enqueue([s.url for s in servers], document_items(harness.db, space, path))
        for server in servers:
            retry_refused(harness.db, server.url)  # each set-aside blob goes back with what vouches for it
        reports = [r for s in servers for r in sync.pusher.push_once(force=True, server=s.url)]
        backlog = {b.server: b for b in sync.queue.backlog()}
        rows = []
        for report in reports:
            left = backlog.get(report.server)
            rows.append({**report.to_json(), "pending": left.pending if left else 0})
    lines = [f"Queued {plural(queued, 'blob')} of {args.document}." if args.document else None]
    for row in rows:
        line = f"{row['server']}: delivered {plural(row['delivered'], 'blob')}, {row['pending']} pending"
        if row.get("refused"):
            line += f", {row['refused']} refused"
        lines.append(line + (f" ({row['error']})" if row.get("error") else "") + ".")
    emit(out, args, {"queued": queued, "servers": rows}, "\n".join(x for x in lines if x))
    return EXIT_FAILURE if any(r["pending"] or r.get("refused") for r in rows) else EXIT_OK


def _pull(args: argparse.Namespace, out: Any) -> int:
    space, path = _address(args.document)
    with opened(args) as harness:
        _servers(harness, None)
        report = harness.sync.puller.pull(space, path)
    data = report.to_json()
    text = (
        f"Pulled {report.target} from {report.server}: {plural(report.fetched, 'blob')} fetched, "
        f"{report.stored} newly stored ({plural(report.comments, 'comment')})."
    )
    if report.errors:
        text += "\n" + "\n".join(f"- {e}" for e in report.errors)
    return emit(out, args, data, text)


def _status(args: argparse.Namespace, out: Any) -> int:
    with opened(args) as harness:
        servers = list(harness.settings.hypermedia.servers)
        backlog = {b.server: b for b in harness.sync.queue.backlog()} if servers else {}
    rows: list[dict[str, Any]] = []
    for server in servers:
        b = backlog.pop(server.url, None)
        row: dict[str, Any] = {"server": server.url, "autoPush": server.auto_push, "pending": b.pending if b else 0}
        if b is not None:
            row.update(refused=b.refused, attempts=b.attempts, nextAttempt=b.due_at, lastError=b.last_error)
        rows.append(row)
    for b in backlog.values():  # owed to a server no longer configured: still shown, never pushed
        rows.append({"server": b.server, "configured": False, "pending": b.pending, "refused": b.refused})
    lines = []
    for row in rows:
        line = f"{row['server']}: {row['pending']} pending"
        if row.get("refused"):
            line += f", {row['refused']} refused"
        if row.get("pending") and row.get("nextAttempt"):
            line += f", next attempt {fmt_time(row['nextAttempt'])}"
        if row.get("lastError"):
            line += f" (last error: {row['lastError']})"
        if row.get("configured") is False:
            line += " (no longer configured)"
        lines.append(line)
    return emit(out, args, rows, "\n".join(lines) or "No Seed servers are configured ([[hypermedia.servers]]).")


__all__ = ["register"]
