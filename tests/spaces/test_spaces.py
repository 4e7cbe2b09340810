"""The registry of address spaces: each space's declared options are exactly what it accepts, and what no space
serves is refused by name, listing what this build does serve."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, get_args

import pytest

from mcp_harness.addresses import AddressKind
from mcp_harness.binding import SessionBinding
from mcp_harness.errors import HarnessError
from mcp_harness.harness import Harness
from mcp_harness.spaces import hm, web
from mcp_harness.spaces.registry import SPACES, read_space, supported_read_forms, supported_write_forms, uses_network
from mcp_harness.verbs.base import VerbContext
from mcp_harness.verbs.read import read
from mcp_harness.verbs.write import write

READ_SAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "memory": ("~/memory/notes.md", {}),
    "tools": ("~/tools/", {}),
    "self": ("~/self", {}),
    "triggers": ("~/triggers/", {}),
    "thread": ("thread:", {}),
    "run": ("run:nope", {}),
    "plan": ("harness://plan", {}),
    "hm": ("hm://nobody", {}),
    "activity": ("activity:", {}),
    "attachment": ("attachment:" + "0" * 64, {}),
    "ipfs": ("ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", {}),
    "web": ("https://example.invalid/", {"raw": True}),  # raw skips the Seed lookup, so nothing is fetched
    "mcp": ("mcp://nobody/", {}),  # no such server is mounted: refused before any connection
}
"""An address of each space, and options that keep a refused read off the network."""
WRITE_SAMPLES = {
    "memory": "~/memory/notes.md",
    "tools": "~/tools/notes",
    "triggers": "~/triggers/notes",
    "run": "run:nope",
    "hm": "hm://nobody/notes",
    "ipfs": "ipfs://",
}
BAD_VALUES: dict[str, object] = {"raw": "yes"}
"""A value each option refuses (default `[]`), so an accepted key fails later, on its value, and changes nothing."""
ABSENT: set[str] = set()


@pytest.fixture
def ctx(harness: Harness) -> Iterator[VerbContext]:
    yield SessionBinding(harness, agent_id=harness.agent().id).context_sync()


def refusal(verb: Callable[[VerbContext, dict[str, Any]], object], ctx: VerbContext, arguments: dict[str, Any]) -> str:
    """The message of a refused call ("" when it succeeds)."""
    try:
        verb(ctx, arguments)
    except HarnessError as error:
        return error.message
    return ""


def test_every_space_has_a_sample_and_every_kind_is_served_or_known_absent() -> None:
    assert set(READ_SAMPLES) == {s.name for s in SPACES if s.read is not None}
    assert set(WRITE_SAMPLES) == {s.name for s in SPACES if s.write is not None}
    served = {kind for space in SPACES for kind in space.kinds}
    assert served | ABSENT == set(get_args(AddressKind)) and not served & ABSENT


def test_the_supported_lists_are_the_ones_the_refusals_have_always_given() -> None:
    assert supported_read_forms() == (
        "~/memory/<path>, ~/self, ~/tools/, ~/tools/<name>, ~/triggers/, ~/triggers/<name>, thread:, thread:<id>, "
        "run:<id>, harness://plan, "
        "hm://<account>/<path>[?v=…][#block] (views /:directory, /:attributes, /:profile, /:comments), activity:, "
        "attachment:<id>, ipfs://<cid>, https://…, mcp://<server>/<uri> (and the harness:// resource URIs)"
    )
    assert supported_write_forms() == (
        "~/memory/<path> (with content, or options {delete: true} / {fromUrl} / {fromAttachment}), ~/tools/<name> "
        "(JSON content, or "
        "options {tool} / {delete: true}), ~/triggers/<name> (JSON content, or options {trigger} / {delete: true}), "
        "run:<id> (JSON content {signal, payload?}), "
        "hm://<account>/<path> (markdown content; options.action document | "
        "update | comment | move | redirect | delete | fork), ipfs://"
    )


@pytest.mark.parametrize("name", sorted(READ_SAMPLES))
def test_a_read_refuses_exactly_the_options_its_space_does_not_declare(ctx: VerbContext, name: str) -> None:
    space = next(s for s in SPACES if s.name == name)
    address, base = READ_SAMPLES[name]
    unknown = refusal(read, ctx, {"address": address, "options": {**base, "zzUnknown": 1}})
    if space.read_options is None:  # the form ignores options
        assert "does not understand" not in unknown
        return
    assert "does not understand" in unknown and "zzUnknown" in unknown
    assert (", ".join(space.read_options) or "(none)") in unknown
    for key in space.read_options:
        options = {**base, key: BAD_VALUES.get(key, [])}
        assert "does not understand" not in refusal(read, ctx, {"address": address, "options": options})


def test_the_web_space_declares_what_the_page_reader_accepts() -> None:
    from mcp_harness.web.reader import READ_OPTIONS

    assert web.READ_OPTIONS == READ_OPTIONS


@pytest.mark.parametrize("name", ["memory", "tools"])
def test_a_write_refuses_exactly_the_options_its_space_does_not_declare(ctx: VerbContext, name: str) -> None:
    space = next(s for s in SPACES if s.name == name)
    assert space.write_options is not None
    address = WRITE_SAMPLES[name]
    unknown = refusal(write, ctx, {"address": address, "options": {"zzUnknown": 1}})
    assert "does not understand" in unknown and f"Supported options: {', '.join(space.write_options)}." in unknown
    for key in space.write_options:
        options = {key: BAD_VALUES.get(key, [])}
        assert "does not understand" not in refusal(write, ctx, {"address": address, "options": options})


def test_an_hm_write_accepts_per_action_exactly_its_declared_options(ctx: VerbContext) -> None:
    address = WRITE_SAMPLES["hm"]
    assert set(hm.WRITE_OPTIONS) == {k for keys in (*hm.ACTION_OPTIONS.values(), hm.FROM_PATH_OPTIONS) for k in keys}
    forms = [({"action": action}, keys) for action, keys in hm.ACTION_OPTIONS.items()]
    forms.append(({"fromPath": "notes.md"}, hm.FROM_PATH_OPTIONS))
    for base, keys in forms:
        unknown = refusal(write, ctx, {"address": address, "options": {**base, "zzUnknown": 1}})
        assert "does not understand" in unknown and f"Supported options: {', '.join(keys)}." in unknown
        options = {**{k: [] for k in keys}, **base}
        assert "does not understand" not in refusal(write, ctx, {"address": address, "options": options})


@pytest.mark.parametrize(
    ("address", "what"),
    [
        ("run:", "Run journals (run:<id>)"),
    ],
)
def test_a_read_no_space_serves_is_refused_by_name_listing_what_exists(
    ctx: VerbContext, address: str, what: str
) -> None:
    expected = f"{what} is not available in this build of mcp-harness. Supported here: {supported_read_forms()}."
    assert refusal(read, ctx, {"address": address}) == expected
    for space in SPACES:
        if space.read is not None:
            assert space.read_form in expected


@pytest.mark.parametrize(
    ("address", "later"),
    [("~/triggers/", None)]
    + [(a, None) for a in ("activity:", "attachment:x", "~/self", "thread:", "https://x", "~/tools/")],
)
def test_a_write_no_space_serves_is_refused_naming_what_exists(
    ctx: VerbContext, address: str, later: str | None
) -> None:
    forms = supported_write_forms()
    if later is None:
        expected = f"Unrecognized write address: {address}. Supported: {forms}."
    else:
        expected = f"{later} is not available in this build of mcp-harness. Supported here: {forms}."
    assert refusal(write, ctx, {"address": address, "content": "x"}) == expected


def test_only_a_web_read_and_a_memory_download_wait_on_the_network() -> None:
    assert uses_network("read", {"address": " HTTPS://example.com/"})
    assert uses_network("write", {"address": "~/memory/", "options": {"fromUrl": "https://example.com/a"}})
    assert not uses_network("write", {"address": "hm://a/b", "options": {"action": "fork", "fromUrl": "hm://a/c"}})
    assert not uses_network("read", {"address": "~/memory/a.md"})
    assert not uses_network("write", {"address": "~/memory/a.md", "content": "x"})
    assert not uses_network("call", {"address": "https://example.com/"})
    assert read_space("web") is not None and read_space("ipfs") is not None
    assert uses_network("read", {"address": "ipfs://bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"})
