"""Completions' own prefix queries (`LIKE … ESCAPE`) on both backends: ids of sessions and runs, Hypermedia accounts
and document paths, with `%`, `_` and `\\` in the typed value matched as themselves, never as wildcards."""

from __future__ import annotations

import pytest
from mcp import Client

from mcp_harness.binding import SessionBinding
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import create_identity
from mcp_harness.server import build_server
from mcp_harness.server.completions import complete_sync
from tests.conftest import call
from tests.spaces.conftest import grant
from tests.store.harnesskit import any_harness_fixture  # noqa: F401  (the any_harness fixture)

pytestmark = pytest.mark.anyio


async def test_id_and_document_completions_on_both_backends(any_harness: Harness) -> None:
    h = any_harness
    alice = create_identity(h, "Alice")
    grant(h, alice)
    async with Client(build_server(h), mode="legacy") as c:
        for path in ("notes", "notes/birds", "notes_old", "recipes"):
            address = f"hm://{alice.account_id}/{path}"
            await call(c, "write", {"address": address, "content": f"# {path}", "options": {"name": path}})
    owner = SessionBinding(h, agent_id=h.agent().id)
    session = h.sessions.list(h.account_id)[0]
    run = h.runs.enqueue(account_id=h.account_id, title="t", origin="user", agent_id=h.agent().id)

    def values(template: str, argument: str, value: str, **known: str) -> list[str]:
        return complete_sync(owner, template, argument, value, known)

    assert values("thread:{id}", "id", session.id[:4]) == [session.id]
    assert values("run:{id}", "id", run.id[:6]) == [run.id]
    for wildcard in ("%", "_", "\\", "%%"):
        assert values("run:{id}", "id", wildcard) == values("thread:{id}", "id", wildcard) == []
    assert values("hm://{account}/{path}", "account", alice.account_id[:8]) == [alice.account_id]
    assert values("hm://{account}/{path}", "account", "%") == []
    account = {"account": alice.account_id}
    assert values("hm://{account}/{path}", "path", "notes", **account) == ["notes", "notes/birds", "notes_old"]
    assert values("hm://{account}/{path}", "path", "notes_", **account) == ["notes_old"]
    assert values("hm://{account}/{path}", "path", "notes%", **account) == []
