"""Two harness processes on loopback (issue 19 point 5, the two-node half): A has B in `[[hypermedia.servers]]`.
A's agent publishes and A pushes to B by itself; B's agent reads the document over MCP and comments, @-mentioning
A's account structurally; A pulls the comment (a `fresh` read); A's activity feed shows it and A's mention trigger
fires. Each side is a real `mcp-harness serve --http`, driven over `/mcp` as a remote client drives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity
from tests.crash.crashkit import query, until
from tests.hypermedia.nodekit import config_file, free_port, serve_http
from tests.spaces.conftest import grant
from tests.triggers.monitorkit import agent_signing_as

pytestmark = pytest.mark.anyio

TOKEN_A, TOKEN_B = "token-of-a", "token-of-b"


def _prepare(config: Path, data_dir: Path, name: str, *, helper: bool = False) -> Identity:
    harness = Harness(load_settings(config, data_dir=data_dir))
    try:
        identity = create_identity(harness, name)
        grant(harness, identity)
        if helper:  # an agent signing as the identity gets the default mention trigger on its account
            agent_signing_as(harness, "helper", identity)
            harness.secrets.set(harness.account_id, "seed-b", TOKEN_B.encode())
        return identity
    finally:
        harness.close()


async def test_a_publishes_b_comments_a_pulls_and_its_mention_trigger_fires(tmp_path: Path) -> None:
    base_b = f"http://127.0.0.1:{free_port()}"
    config_b = config_file(tmp_path / "b.toml", "[hypermedia]\npublic = true\n")
    config_a = config_file(
        tmp_path / "a.toml",
        '[web]\nallow_hosts = ["127.0.0.1"]\n\n[triggers]\npoll_interval_s = 0.05\n\n'
        f'[[hypermedia.servers]]\nurl = "{base_b}"\ntoken_secret = "seed-b"\n',
    )
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    alice = _prepare(config_a, a_dir, "Alice", helper=True)
    _prepare(config_b, b_dir, "Bob")
    doc = f"hm://{alice.account_id}/plan"
    port_b = int(base_b.rsplit(":", 1)[1])
    async with serve_http(b_dir, config_b, TOKEN_B, port_b) as b, serve_http(a_dir, config_a, TOKEN_A) as a:
        wrote = await a.call("write", {"address": doc, "content": "---\nname: Plan\n---\n\nShip it on Friday."})
        assert wrote["push"][0]["server"] == base_b and wrote["push"][0]["queued"] == 3
        await until(
            lambda: bool(query(b_dir / "harness.db", "SELECT 1 FROM hm_refs WHERE path = '/plan'")),
            "A's push reaching B",
            60,
            a.log,
        )
        read = await b.call("read", {"address": doc})
        assert "Ship it on Friday." in read["markdown"] and "pulled" not in read  # B holds it: it was pushed
        mention = f"Friday works, [Alice](hm://{alice.account_id})."
        said = await b.call("write", {"address": doc, "content": mention, "options": {"action": "comment"}})
        comments = await a.call("read", {"address": f"{doc}/:comments", "options": {"fresh": True}})
        assert comments["pulled"]["server"] == base_b and comments["pulled"]["comments"] == 1
        assert [c["id"] for c in comments["comments"]] == [said["id"]]
        feed = query(a_dir / "harness.db", "SELECT type FROM hm_activity WHERE type = 'comment'")
        assert len(feed) == 1  # the pulled comment is in A's activity feed
        await until(
            lambda: bool(query(a_dir / "harness.db", "SELECT 1 FROM trigger_firings")), "A's mention trigger", 60, a.log
        )
    sql = "SELECT t.name, f.dedupe_key FROM trigger_firings f JOIN triggers t ON t.id = f.trigger_id"
    (firing,) = query(a_dir / "harness.db", sql)
    assert firing["name"] == "Mentions of helper"  # fired once, for the agent signing as Alice
