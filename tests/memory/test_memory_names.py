"""Names only sandboxed code can create (not UTF-8, control characters, backslashes, too deep) never break a read.

The rule (memory/paths.py): listings show such an entry escaped and flagged `addressable: false`, and the rest comes
back as usual; resources/list offers only addressable files; writes refuse control characters; the sandbox's change
report uses the same escaped form. Everything here goes through the real sandbox and the SDK's client.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from starlette.responses import Response

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.runs.prompt import space_index
from mcp_harness.server import build_server
from tests.conftest import call, refused, serving, text_of

pytestmark = pytest.mark.anyio

# The exact reproduction, then the rest from Python with bytes paths.
SHELL_BAD_NAME = "touch \"$(printf 'bad\\377name')\""
PYTHON_ODD_NAMES = """
import os
os.makedirs(b'dir\\xff', exist_ok=True)
os.makedirs(b'ok/deep', exist_ok=True)
os.makedirs(b'/'.join([b'd'] * 17), exist_ok=True)
for name in [b'dir\\xff/inner.txt', b'ok/n\\xffested', b'ctl\\nname', b'back\\\\slash', b'ok.txt',
             b'ok/deep/fine.md', b'/'.join([b'd'] * 17) + b'/too-deep.txt']:
    with open(name, 'wb') as fh:
        fh.write(b'x')
"""
ROOT_ENTRIES = [
    ("back\\\\slash", "file", False),
    ("bad\\xffname", "file", False),
    ("ctl\\nname", "file", False),
    ("d", "dir", True),
    ("dir\\xff", "dir", False),
    ("ok", "dir", True),
    ("ok.txt", "file", True),
]


def execute(code: str, runtime: str) -> dict[str, object]:
    return {"tool": "execute", "input": {"runtime": runtime, "code": code}}


async def plant_odd_names(client: Client) -> None:
    shell = await call(client, "call", execute(SHELL_BAD_NAME, "shell"))
    assert shell["changedFiles"] == [{"path": "bad\\xffname", "change": "added"}]
    ran = await call(client, "call", execute(PYTHON_ODD_NAMES, "python"))
    assert ran["success"] is True, ran
    changed = [c["path"] for c in ran["changedFiles"]]
    assert changed == [
        "back\\\\slash",
        "ctl\\nname",
        "/".join(["d"] * 17) + "/too-deep.txt",
        "dir\\xff/inner.txt",
        "ok.txt",
        "ok/deep/fine.md",
        "ok/n\\xffested",
    ]


async def test_a_listing_shows_unaddressable_names_escaped_and_flagged(client: Client) -> None:
    await plant_odd_names(client)
    result = await client.call_tool("read", {"address": "~/memory/"})
    assert not result.is_error, result.content
    data = result.structured_content
    assert data is not None
    assert [(e["path"], e["type"], e.get("addressable", True)) for e in data["entries"]] == ROOT_ENTRIES
    assert data["summary"].endswith(
        "4 names cannot be addressed (not UTF-8, or with a control character or a backslash) and are shown escaped: "
        "rename with call execute."
    )
    lines = text_of(result).split("\n\n", 1)[1].split("\n")
    assert len(lines) == len(ROOT_ENTRIES)  # a newline in a name cannot split an entry
    assert "- bad\\xffname (0 bytes; not addressable: rename it with call execute)" in lines
    assert "- ok.txt (1 bytes)" in lines
    nested = await call(client, "read", {"address": "~/memory/ok/"})
    assert [(e["path"], e.get("addressable", True)) for e in nested["entries"]] == [
        ("ok/deep", True),
        ("ok/n\\xffested", False),
    ]
    # Depth 16 lists; its child would be the 17th segment, which no address reaches.
    deep = await call(client, "read", {"address": "~/memory/" + "/".join(["d"] * 16) + "/"})
    assert [(e["path"], e.get("addressable", True)) for e in deep["entries"]] == [("/".join(["d"] * 17), False)]
    assert (await call(client, "read", {"address": "~/memory/ok/deep/fine.md"}))["content"] == "x"


async def test_self_and_the_space_index_summarize_around_unaddressable_names(client: Client, harness: Harness) -> None:
    await plant_odd_names(client)
    me = await call(client, "read", {"address": "~/self", "format": "json"})
    assert me["memory"] == {
        "totalFiles": 8,
        "topLevel": [
            "d/ (1 file, 1 bytes; 1 not addressable)",
            "dir\\xff/ (1 file, 1 bytes; 1 not addressable)",
            "ok/ (2 files, 2 bytes; 1 not addressable)",
            "back\\\\slash (not addressable)",
            "bad\\xffname (not addressable)",
            "ctl\\nname (not addressable)",
            "ok.txt",
        ],
        "unaddressableFiles": 6,
    }
    assert "- bad\\xffname (not addressable)" in text_of(await client.call_tool("read", {"address": "~/self"}))
    index = space_index(harness, harness.agent())
    index.encode("utf-8")  # no surrogate survives into what a model is shown
    memory_line = next(line for line in index.split("\n") if line.startswith("memory/"))
    assert "bad\\xffname" in memory_line and "ctl\\nname" in memory_line and "ok.txt" in memory_line


async def test_resources_offer_only_addressable_files_and_still_read(client: Client) -> None:
    await plant_odd_names(client)
    listed = await client.list_resources()
    memory = [r.uri for r in listed.resources if r.uri.startswith("harness://memory/")]
    assert memory == ["harness://memory/ok.txt", "harness://memory/ok/deep/fine.md"]
    root = (await client.read_resource("harness://memory/")).contents[0]
    assert isinstance(root, types.TextResourceContents)
    entries = json.loads(root.text)["entries"]
    assert [(e["path"], e["type"], e.get("addressable", True)) for e in entries] == ROOT_ENTRIES


async def test_a_name_copied_from_a_listing_explains_itself(client: Client) -> None:
    await plant_odd_names(client)
    error = await refused(client, "read", {"address": "~/memory/bad\\xffname"})
    assert error["status"] == 404
    assert error["message"].startswith("Memory file not found: bad/xffname A backslash separates directories")
    assert "Rename such a file with call execute" in error["message"]


async def test_a_scripts_read_of_the_listing_succeeds(client: Client) -> None:
    await plant_odd_names(client)
    script = """
def main(ctx):
    got = ctx.call("read", {"address": "~/memory/", "format": "json"})
    return [[e["path"], e.get("addressable", True)] for e in got["entries"]]
"""
    with anyio.fail_after(30):
        result = await call(client, "delegate", {"script": script})
    assert result["status"] == "succeeded", result
    assert [tuple(e) for e in result["output"]] == [(p, ok) for p, _, ok in ROOT_ENTRIES]


async def test_temp_names_stay_out_of_listings_resources_and_change_reports(client: Client) -> None:
    code = "touch .mcp-harness-tmp-zz kept.txt; mkdir .mcp-harness-tmp-d; touch .mcp-harness-tmp-d/f"
    ran = await call(client, "call", execute(code, "shell"))
    assert ran["changedFiles"] == [{"path": "kept.txt", "change": "added"}]
    listing = await call(client, "read", {"address": "~/memory/"})
    assert [e["path"] for e in listing["entries"]] == ["kept.txt"]
    memory = [r.uri for r in (await client.list_resources()).resources if r.uri.startswith("harness://memory/")]
    assert memory == ["harness://memory/kept.txt"]
    error = await refused(client, "write", {"address": "~/memory/.mcp-harness-tmp-x", "content": "x"})
    assert error["status"] == 400 and "reserved" in error["message"]


# -- fromUrl naming --------------------------------------------------------------------------------------------


async def _any_path(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers every path (router patterns do not match a decoded newline)."""
    await Response("body", media_type="text/plain")(scope, receive, send)


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async with serving(_any_path, lifespan="off", force_exit=True) as base:
        yield base


async def test_download_names_from_odd_urls_are_addressable(tmp_path: Path, site: str) -> None:
    harness = Harness(load_settings(data_dir=tmp_path / "data", web={"allow_hosts": ["127.0.0.1"]}))
    try:
        async with Client(build_server(harness), mode="legacy") as c:
            cases = {
                "a%0Ab%FFc.txt": "got/a-b\ufffdc.txt",  # a newline and an undecodable byte
                "back%5Cslash.txt": "got/back-slash.txt",
                ".mcp-harness-tmp-1.txt": "got/download.mcp-harness-tmp-1.txt",
                "%F0%9F%98%80" * 100: "got/" + "\U0001f600" * 32 + ".txt",  # cut to 128 bytes, not characters
            }
            for segment, expected in cases.items():
                data = await call(c, "write", {"address": "~/memory/got/", "options": {"fromUrl": f"{site}/{segment}"}})
                assert data["path"] == expected
                assert (await call(c, "read", {"address": f"~/memory/{expected}"}))["content"] == "body"
    finally:
        harness.close()
