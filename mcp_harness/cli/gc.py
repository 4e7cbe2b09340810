"""`mcp-harness gc`: prune old events and finished runs' journals as `[store] retain` says, then vacuum.

What it may prune and what it never touches is `store/retention.py`'s; this only reads the settings (the flags
override `[store]`), runs it on the data dir's database and reports. Safe beside a running `serve`: it prunes in small
transactions and re-checks each session inside its own.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp_harness.cli._common import command_flags, emit, plural
from mcp_harness.config import load_settings


def register(sub: Any) -> None:
    gc = sub.add_parser(
        "gc",
        help="prune old session events and finished runs' journals ([store] retain), then vacuum the database",
        description="Prune events older than [store] retain (or while the log is larger than its size), never a "
        "session's last keep_last events, a call still owed its result, or anything of an unfinished run; drop "
        "stored values no event uses and attachment files no session holds; then give the space back (the first gc "
        "rewrites the database once).",
    )
    gc.set_defaults(handler=_gc_command)
    command_flags(gc)
    gc.add_argument("--dry-run", action="store_true", help="report what would be pruned; change nothing")
    gc.add_argument("--retain", help='override [store] retain: "90d", "12h", "2GB", "90d,5GB" or "forever"')
    gc.add_argument("--keep-last", type=int, help="override [store] keep_last: events every session keeps")


def _size(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _gc_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.store.attachments import AttachmentStore
    from mcp_harness.store.open import open_serving_store
    from mcp_harness.store.retention import Retention, collect

    settings = load_settings(
        args.config, data_dir=args.data_dir, **{"store.retain": args.retain, "store.keep_last": args.keep_last}
    )
    max_age, max_bytes = settings.store.limits()
    policy = Retention(max_age_ms=max_age, max_bytes=max_bytes, keep_last=settings.store.keep_last)
    db = open_serving_store(settings)  # PostgreSQL: the shared data root's attachments are swept too
    try:
        files = AttachmentStore(db, settings.data_dir / "attachments")
        report = db.run(lambda d: collect(d, policy, dry_run=args.dry_run, attachments=files))  # pyright: ignore[reportArgumentType]
    finally:
        db.close()
    p = report.pruned
    verb = "Would prune" if report.dry_run else "Pruned"
    lines = [
        f"{verb} {plural(p.events, 'event')} ({_size(p.event_bytes)}) from {plural(p.sessions, 'session')}"
        + (f" older than {p.cutoff_time}" if p.cutoff else " (none was old enough)")
        + (f"; kept whole: {plural(p.live_sessions, 'session')} with an unfinished run" if p.live_sessions else "")
        + ".",
        f"{verb} {plural(p.payloads, 'stored value')} no event uses ({_size(p.payload_bytes)}), the journals of "
        f"{plural(p.journals, 'finished run')} ({plural(p.journal_entries, 'entry', 'entries')}, "
        f"{_size(p.journal_bytes)}).",
    ]
    if report.attachment_files:
        lines.append(
            f"{verb} {plural(report.attachment_files, 'attachment file')} no session holds any more "
            f"({_size(report.attachment_bytes)})."
        )
    if report.dry_run:
        lines.append(f"Database: {_size(report.file_bytes_before)} (a dry run changes nothing).")
    elif report.vacuum == "none":  # PostgreSQL: autovacuum gives the space back on its own
        lines.append(f"Database: {_size(report.file_bytes_before)} → {_size(report.file_bytes_after)} (autovacuum).")
    else:
        how = "rewritten once with incremental auto-vacuum" if report.vacuum == "full" else "incremental vacuum"
        lines.append(f"Database: {_size(report.file_bytes_before)} → {_size(report.file_bytes_after)} ({how}).")
    return emit(out, args, report.to_json(), "\n".join(lines))
