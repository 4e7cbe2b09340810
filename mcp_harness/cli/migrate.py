"""`mcp-harness migrate`: bring the store's schema up to this version, or say what it lacks (`--status`).

`serve` and every command migrate as they open the store anyway; this is the step a deployment runs once before
starting replicas (README, "Deploying several replicas"), and what an operator reads to see a database's state. On
PostgreSQL the steps run under an advisory lock, so replicas that start meanwhile wait and apply nothing twice.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp_harness.cli._common import EXIT_FAILURE, EXIT_OK, command_flags, emit, plural, settings_of


def register(sub: Any) -> None:
    migrate = sub.add_parser(
        "migrate",
        help="apply the store's pending schema migrations (SQLite or [store] url's PostgreSQL)",
        description="Apply every schema migration the store lacks, each in its own transaction, and print their "
        "names (or 'up to date'). On PostgreSQL concurrent starters wait on an advisory lock. --status applies "
        "nothing and exits 1 when some are pending.",
    )
    migrate.set_defaults(handler=_migrate_command)
    command_flags(migrate)
    migrate.add_argument("--status", action="store_true", help="say what is applied and pending; change nothing")


def _migrate_command(args: argparse.Namespace, out: Any) -> int:
    from mcp_harness.store.open import migrate_store, schema_state

    settings = settings_of(args)
    if args.status:
        state = schema_state(settings)
        data = {
            "backend": state.backend,
            "store": state.where,
            "applied": list(state.applied),
            "pending": list(state.pending),
        }
        head = f"{state.backend} store {state.where}: {plural(len(state.applied), 'migration')} applied"
        text = head + (f"; pending: {', '.join(state.pending)}." if state.pending else "; up to date.")
        emit(out, args, data, text)
        return EXIT_FAILURE if state.pending else EXIT_OK
    before, applied = migrate_store(settings)
    data = {"backend": before.backend, "store": before.where, "applied": applied}
    if applied:
        text = f"Migrated the {before.backend} store {before.where}: " + ", ".join(applied) + "."
    else:
        text = f"The {before.backend} store {before.where} is up to date."
    return emit(out, args, data, text)
