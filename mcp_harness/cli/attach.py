"""`mcp-harness attach SESSION FILE…`: give a conversation files, as a user drops them into a chat (issue 18).

Each file is streamed into the attachment store (content-addressed; at most 100 MiB a file, 200 a conversation)
and its id printed, one line a file: the agent reads it as `attachment:<id>`, and children it delegates to can too.
Every file is checked readable before the first is stored, so a typo stores nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mcp_harness.cli._common import command_flags, emit, opened
from mcp_harness.errors import BadRequest


def register(sub: Any) -> None:
    attach = sub.add_parser(
        "attach",
        help="give a conversation files (prints their attachment ids)",
        description="Store files as attachments of SESSION (at most 100 MiB each, 200 per conversation) and print "
        "one id a file: the 64-hex SHA-256 the agent reads as attachment:<id>. Images reach a model that accepts "
        "images; text is read inline; write ~/memory/<path> {fromAttachment} saves one into memory.",
    )
    attach.set_defaults(handler=_attach_command)
    command_flags(attach)
    attach.add_argument("session", metavar="SESSION", help="the conversation (ids from `mcp-harness sessions`)")
    attach.add_argument("files", metavar="FILE", nargs="+", type=Path, help="files to attach")
    attach.add_argument("--mime-type", help="the MIME type of every file (default: from its bytes or its name)")


def _attach_command(args: argparse.Namespace, out: Any) -> int:
    files: list[Path] = args.files
    for file in files:
        if not file.is_file():
            why = "is a directory" if file.is_dir() else "does not exist or is not a regular file"
            raise BadRequest(f"Cannot attach {file}: it {why}. Give regular files.")
    with opened(args) as harness:
        session = harness.sessions.get(args.session)  # 404 (exit 3) for an unknown session
        records = []
        for file in files:
            try:
                source = file.open("rb")
            except OSError as exc:
                raise BadRequest(f"Cannot read {file}: {exc.strerror or exc}.") from exc
            with source:
                records.append(harness.attachments.add(session.id, file.name, args.mime_type, source))
    lines = [f"{r.id}  {r.name} ({r.mime_type}, {r.size} bytes)" for r in records]
    return emit(out, args, [r.to_json() for r in records], "\n".join(lines))
