"""The address spaces `read` and `write` reach, in the order the verb contracts present them.

A new space is one module declaring `SPACE = Space(...)` (spaces/space.py), listed in `SPACES` below; the dispatch,
the network check, the resource catalog, the contract text and the "Supported: …" lists all come from here. Kinds
that `addresses.py` parses but no space serves are refused by name, with the list of what this build serves
(`_unsupported.py`).

verbs/contracts.py builds the read and write descriptions from these declarations at import, so no space module
imports verbs/contracts.py; the verbs' contracts reach the `~/tools` space as `ctx.services.verbs` (the import-cycle
check in tests/test_layering.py holds this).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_harness.addresses import AddressKind, parse_address
from mcp_harness.spaces import activity, hm, memory, plan, run, thread, tools, web
from mcp_harness.spaces import attachment as attachment_space
from mcp_harness.spaces import ipfs as ipfs_space
from mcp_harness.spaces import mcp as mcp_space
from mcp_harness.spaces import self as self_space
from mcp_harness.spaces import triggers as triggers_space
from mcp_harness.spaces.space import ResourceForm, Space

SPACES: tuple[Space, ...] = (
    memory.SPACE,
    tools.SPACE,
    self_space.SPACE,
    triggers_space.SPACE,
    thread.SPACE,
    run.SPACE,
    plan.SPACE,
    hm.SPACE,
    activity.SPACE,
    attachment_space.SPACE,
    ipfs_space.SPACE,
    web.SPACE,
    mcp_space.SPACE,
)


def _by_kind(spaces: Iterable[Space]) -> dict[AddressKind, Space]:
    out: dict[AddressKind, Space] = {}
    for space in spaces:
        for kind in space.kinds:
            if kind in out:
                raise ValueError(f"address kind {kind!r} is served by both {out[kind].name} and {space.name}")
            out[kind] = space
    return out


_READERS = _by_kind(s for s in SPACES if s.read is not None)
_WRITERS = _by_kind(s for s in SPACES if s.write is not None)


def read_space(kind: AddressKind) -> Space | None:
    """The space that reads addresses of this kind, if this build has one."""
    return _READERS.get(kind)


def write_space(kind: AddressKind) -> Space | None:
    """The space that writes addresses of this kind, if this build has one."""
    return _WRITERS.get(kind)


def _forms(forms: list[str]) -> str:
    # The `~/` forms first in name order, then the rest in registry order: the line as it was written by hand.
    home = sorted(f for f in forms if f.startswith("~/"))
    return ", ".join([*home, *(f for f in forms if not f.startswith("~/"))])


@functools.cache
def supported_read_forms() -> str:
    """What `read` serves, in one line, for its refusals."""
    return _forms([s.read_form for s in SPACES if s.read is not None]) + " (and the harness:// resource URIs)"


@functools.cache
def supported_write_forms() -> str:
    """What `write` serves, in one line, for its refusals."""
    return _forms([s.write_form for s in SPACES if s.write is not None])


def read_lines() -> str:
    """The spaces' lines of the read verb's description, one or more per space."""
    return "\n".join(s.read_line for s in SPACES if s.read_line)


def read_details() -> str:
    """The spaces' sections of the read verb's full contract."""
    return "\n\n".join(s.read_details for s in SPACES if s.read_details)


def write_lines() -> str:
    return "\n".join(s.write_line for s in SPACES if s.write_line)


def write_details() -> str:
    return "\n\n".join(s.write_details for s in SPACES if s.write_details)


def resource_forms() -> list[ResourceForm]:
    """Every resource and resource template the spaces offer, in registry order."""
    return [form for space in SPACES for form in space.resources]


def uses_network(verb: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a `read` or `write` call may wait on the network, by what its space declares: the harness then logs
    the call on its own first, so a slow fetch does not hold the database."""
    raw = arguments.get("address")
    address = parse_address(raw) if isinstance(raw, str) else None
    if address is None:
        return False
    given = arguments.get("options")
    options: Mapping[str, Any] = given if isinstance(given, dict) else {}  # pyright: ignore[reportUnknownVariableType]
    if verb == "read":
        space = read_space(address.kind)
        return space is not None and space.reads(address) and space.network_read(address, options)
    if verb == "write":
        space = write_space(address.kind)
        return space is not None and space.writes(address) and space.network_write(address, options)
    return False
