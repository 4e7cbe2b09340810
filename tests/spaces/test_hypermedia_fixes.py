"""`write hm://` and `read hm://` through the MCP client, the review fixes: each test here failed before its fix."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from mcp_harness.harness import Harness
from mcp_harness.identity.identities import Identity, create_identity, update_identity
from mcp_harness.identity.keys import KeyPair
from tests.conftest import call, refused
from tests.spaces.conftest import grant, ids_of

pytestmark = pytest.mark.anyio


async def test_a_version_of_another_document_is_not_read_as_this_one(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    made_a = await call(client, "write", {"address": f"{base}/a", "content": "Doc A.", "options": {"name": "A"}})
    made_b = await call(client, "write", {"address": f"{base}/b", "content": "Doc B.", "options": {"name": "B"}})
    wrong = await refused(client, "read", {"address": f"{base}/a?v={made_b['version']}"})
    assert wrong["status"] == 404 and "not a version of" in wrong["message"]
    assert (await call(client, "read", {"address": f"{base}/a?v={made_a['version']}"}))["name"] == "A"
    link = await refused(
        client,
        "write",
        {"address": f"{base}/c", "options": {"name": "C"}, "content": f"[old]({base}/a?v={made_b['version']})"},
    )
    assert link["status"] == 400 and "skipLinkCheck" in link["message"]
    fork = await refused(
        client,
        "write",
        {"address": f"{base}/f", "options": {"action": "fork", "fromUrl": f"{base}/a?v={made_b['version']}"}},
    )
    assert fork["status"] == 404


async def test_commenting_on_another_accounts_document_needs_no_capability(client: Client, harness: Harness) -> None:
    alice, bob = create_identity(harness, "Alice"), create_identity(harness, "Bob")
    grant(harness, alice)
    home = f"hm://{bob.account_id}"
    made = await call(client, "write", {"address": home, "content": "Hello Bob.", "options": {"action": "comment"}})
    assert made["id"].startswith(f"hm://{alice.account_id}/") and made["target"] == home
    thread = await call(client, "read", {"address": f"{home}/:comments"})
    assert [c["author"] for c in thread["comments"]] == [alice.account_id]
    # Changing Bob's document still needs his key or a capability.
    update = await refused(client, "write", {"address": home, "content": "x", "options": {"action": "update"}})
    assert update["status"] == 403


async def test_a_reply_must_answer_a_comment_on_the_same_document(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/a", "content": "A.", "options": {"name": "A"}})
    await call(client, "write", {"address": f"{base}/b", "content": "B.", "options": {"name": "B"}})
    first = await call(client, "write", {"address": f"{base}/a", "content": "On A.", "options": {"action": "comment"}})
    stray = await refused(
        client,
        "write",
        {"address": f"{base}/b", "content": "Reply.", "options": {"action": "comment", "replyTo": first["id"]}},
    )
    assert stray["status"] == 400 and f"{base}/a" in stray["message"]


async def test_a_redirected_path_is_replaced_by_a_create_not_updated_in_place(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/old", "content": "Moving.", "options": {"name": "Mover"}})
    await call(client, "write", {"address": f"{base}/old", "options": {"action": "move", "toPath": "/new"}})
    for options in ({"action": "update"}, {"action": "delete"}, {"action": "comment"}):
        content = None if options["action"] == "delete" else "x"
        error = await refused(
            client, "write", {"address": f"{base}/old", "options": options, **({"content": content} if content else {})}
        )
        assert error["status"] == 409 and f"redirects to {base}/new" in error["message"], error
    fresh = await call(client, "write", {"address": f"{base}/old", "content": "A new page.", "options": {"name": "N"}})
    assert fresh["id"] == f"{base}/old"
    read = await call(client, "read", {"address": f"{base}/old"})
    assert read["id"] == f"{base}/old" and "redirectedFrom" not in read and "A new page." in read["markdown"]
    assert "Moving." in (await call(client, "read", {"address": f"{base}/new"}))["markdown"]
    # A move is undone by moving back onto the redirect it left.
    await call(client, "write", {"address": f"{base}/new", "options": {"action": "move", "toPath": "/back"}})
    await call(client, "write", {"address": f"{base}/back", "options": {"action": "move", "toPath": "/new"}})
    assert (await call(client, "read", {"address": f"{base}/back"}))["id"] == f"{base}/new"
    await call(client, "write", {"address": f"{base}/new", "options": {"action": "delete"}})
    deleted = await refused(
        client, "write", {"address": f"{base}/new", "content": "y", "options": {"action": "update"}}
    )
    assert deleted["status"] == 404 and "deleted" in deleted["message"]


async def test_redirects_refuse_loops_and_deleted_targets(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    for name in ("a", "b", "c"):
        await call(client, "write", {"address": f"{base}/{name}", "content": name, "options": {"name": name}})
    await call(client, "write", {"address": f"{base}/b", "options": {"action": "redirect", "toUrl": f"{base}/a"}})
    loop = await refused(
        client,
        "write",
        {"address": f"{base}/a", "options": {"action": "redirect", "toUrl": f"{base}/b", "skipLinkCheck": True}},
    )
    assert loop["status"] == 400 and "loop" in loop["message"]
    await call(client, "write", {"address": f"{base}/c", "options": {"action": "delete"}})
    dead = await refused(
        client, "write", {"address": f"{base}/a", "options": {"action": "redirect", "toUrl": f"{base}/c"}}
    )
    assert dead["status"] == 400 and "deleted" in dead["message"] and "skipLinkCheck" in dead["message"]
    versioned = await refused(
        client, "write", {"address": f"{base}/a", "options": {"action": "redirect", "toUrl": f"{base}/b#blk"}}
    )
    assert versioned["status"] == 400


async def test_move_and_fork_need_the_parent_and_refuse_what_they_would_drop(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/a", "content": "A.", "options": {"name": "A"}})
    orphan = await refused(client, "write", {"address": f"{base}/a", "options": {"action": "move", "toPath": "/x/y"}})
    assert orphan["status"] == 400 and "parent" in orphan["message"]
    inside = await refused(
        client, "write", {"address": f"{base}/a", "options": {"action": "move", "toPath": "/a/under"}}
    )
    assert inside["status"] == 400 and "inside itself" in inside["message"]
    fork_orphan = await refused(
        client, "write", {"address": f"{base}/nop/x", "options": {"action": "fork", "fromUrl": f"{base}/a"}}
    )
    assert fork_orphan["status"] == 400 and "parent" in fork_orphan["message"]
    for options in (
        {"action": "fork", "fromUrl": f"{base}/a"},
        {"action": "move", "toPath": "/m"},
        {"action": "delete"},
        {"action": "redirect", "toUrl": f"{base}/a"},
    ):
        dropped = await refused(client, "write", {"address": f"{base}/z", "content": "ignored?", "options": options})
        assert dropped["status"] == 400 and "content" in dropped["message"], dropped
    block = await refused(
        client, "write", {"address": f"{base}/f", "options": {"action": "fork", "fromUrl": f"{base}/a#blk"}}
    )
    assert block["status"] == 400 and "#" in block["message"]
    dots = await refused(client, "write", {"address": f"{base}/..", "content": "x", "options": {"name": "D"}})
    assert dots["status"] == 400 and "'..'" in dots["message"]


async def test_concurrent_writes_are_each_atomic(
    client: Client, alice: Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    import anyio

    from mcp_harness.spaces.hm import write as hm_write

    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/src", "content": "Source.", "options": {"name": "Src"}})
    slow_live = hm_write.live

    def live(node: Any, target: Any) -> Any:
        found = slow_live(node, target)
        time.sleep(0.2)  # widen the gap between the existence check and the publish
        return found

    monkeypatch.setattr(hm_write, "live", live)
    outcomes: list[bool] = []

    async def fork() -> None:
        result = await client.call_tool(
            "write", {"address": f"{base}/copy", "options": {"action": "fork", "fromUrl": f"{base}/src"}}
        )
        outcomes.append(not result.is_error)

    async def update(key: str) -> None:
        await call(
            client, "write", {"address": f"{base}/src", "options": {"action": "update", "metadata": {key: "set"}}}
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(fork)
        tg.start_soon(fork)
        for key in ("k1", "k2", "k3"):
            tg.start_soon(update, key)
    assert sorted(outcomes) == [False, True]
    attrs = await call(client, "read", {"address": f"{base}/src/:attributes"})
    assert {"k1", "k2", "k3"} <= set(attrs["metadata"])


async def test_update_metadata_removes_with_null_but_never_the_name(client: Client, alice: Identity) -> None:
    url = f"hm://{alice.account_id}/m"
    metadata = {"name": "M", "summary": "S", "theme": {"headerLayout": "C"}}
    await call(client, "write", {"address": url, "content": "M.", "options": {"metadata": metadata}})
    await call(client, "write", {"address": url, "options": {"action": "update", "metadata": {"summary": None}}})
    assert "summary" not in (await call(client, "read", {"address": f"{url}/:attributes"}))["metadata"]
    for bad in ({"name": None}, {"name": ""}, {"name": 3}):
        error = await refused(client, "write", {"address": url, "options": {"action": "update", "metadata": bad}})
        assert error["status"] == 400 and "name" in error["message"]
    same = await call(
        client, "write", {"address": url, "options": {"action": "update", "metadata": {"theme.headerLayout": "C"}}}
    )
    assert "nothing to publish" in same["summary"] and same["blobs"] == []


async def test_link_check_covers_block_fragments_and_comment_bodies(client: Client, alice: Identity) -> None:
    base = f"hm://{alice.account_id}"
    await call(client, "write", {"address": f"{base}/t", "content": "Target.", "options": {"name": "T"}})
    block = ids_of((await call(client, "read", {"address": f"{base}/t"}))["markdown"])[0]
    await call(
        client, "write", {"address": f"{base}/ok", "content": f"[here]({base}/t#{block})", "options": {"name": "OK"}}
    )
    missing = await refused(
        client, "write", {"address": f"{base}/bad", "content": f"[here]({base}/t#nope)", "options": {"name": "Bad"}}
    )
    assert missing["status"] == 400 and "#nope" in missing["message"]
    comment = await refused(
        client, "write", {"address": f"{base}/t", "content": f"See <{base}/ghost>.", "options": {"action": "comment"}}
    )
    assert comment["status"] == 400 and "skipLinkCheck" in comment["message"]


async def test_profile_update_republishes_the_signers_profile(
    client: Client, alice: Identity, harness: Harness
) -> None:
    from mcp_harness.hypermedia.cid import RAW, cid_of
    from mcp_harness.identity.identities import list_identities

    home = f"hm://{alice.account_id}"
    avatar = f"ipfs://{cid_of(b'picture', RAW)}"
    dry = await call(
        client, "write", {"address": home, "dryRun": True, "options": {"action": "profile.update", "name": "Alicia"}}
    )
    assert dry["dryRun"] is True
    assert (await call(client, "read", {"address": f"{home}/:profile"}))["name"] == "Alice"
    made = await call(
        client,
        "write",
        {
            "address": home,
            "options": {
                "action": "profile.update",
                "name": "Alicia",
                "metadata": {"avatar": avatar, "description": "Hi."},
            },
        },
    )
    assert made["id"] == home and made["name"] == "Alicia"
    profile = await call(client, "read", {"address": f"{home}/:profile"})
    assert (profile["name"], profile["avatar"], profile["description"]) == ("Alicia", avatar, "Hi.")
    assert [i.label for i in list_identities(harness)] == ["Alicia"]
    # Fields left out are kept; null removes one.
    await call(
        client, "write", {"address": home, "options": {"action": "profile.update", "metadata": {"description": None}}}
    )
    profile = await call(client, "read", {"address": f"{home}/:profile"})
    assert profile["name"] == "Alicia" and profile["avatar"] == avatar and "description" not in profile
    https = await refused(
        client,
        "write",
        {"address": home, "options": {"action": "profile.update", "metadata": {"avatar": "https://example.org/a.png"}}},
    )
    assert https["status"] == 400 and "ipfs://" in https["message"]
    long = await refused(
        client,
        "write",
        {"address": home, "options": {"action": "profile.update", "metadata": {"description": "x" * 512}}},
    )
    assert long["status"] == 400 and "512" in long["message"]
    unknown = await refused(
        client, "write", {"address": home, "options": {"action": "profile.update", "metadata": {"colour": "red"}}}
    )
    assert unknown["status"] == 400 and "colour" in unknown["message"] and "avatar" in unknown["message"]
    nested = await refused(
        client, "write", {"address": f"{home}/doc", "options": {"action": "profile.update", "name": "X"}}
    )
    assert nested["status"] == 400 and "account" in nested["message"]
    other = await refused(
        client,
        "write",
        {"address": f"hm://{KeyPair.generate().account_id}", "options": {"action": "profile.update", "name": "X"}},
    )
    assert other["status"] in (400, 403)
    draft = await refused(client, "write", {"address": home, "options": {"action": "draft.create"}})
    assert draft["status"] == 400 and "profile.update" in draft["message"]


async def test_renaming_an_identity_keeps_the_profile_picture_and_description(
    client: Client, alice: Identity, harness: Harness
) -> None:
    avatar = "ipfs://bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"
    await call(
        client,
        "write",
        {
            "address": f"hm://{alice.account_id}",
            "options": {
                "action": "profile.update",
                "metadata": {"avatar": avatar, "description": "Writes field notes."},
            },
        },
    )
    update_identity(harness, alice.name, "Alice B.")
    profile = await call(client, "read", {"address": f"hm://{alice.account_id}/:profile"})
    assert (profile["name"], profile["avatar"], profile["description"]) == ("Alice B.", avatar, "Writes field notes.")
