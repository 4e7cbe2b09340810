"""What an address space declares: its handlers, options, network use, resources and contract text, in one value.

A space module (`spaces/memory.py`, `spaces/self.py`, …) ends with `SPACE = Space(...)`; `spaces/registry.py` lists
them. Everything the harness once kept in five places — the parser's supported-forms line, the read and write
dispatch, the network check, the resource catalog and the verb contracts — is generated from these declarations.
Resources are plain data here: `spaces/` knows nothing of MCP, `resources/` turns them into MCP types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp_harness.addresses import Address, AddressKind
from mcp_harness.verbs.base import VerbContext, VerbResult

ReadHandler = Callable[[VerbContext, Address, dict[str, Any], str], VerbResult]
"""`(ctx, address, options, fmt)`: a read of an address the space serves."""
WriteHandler = Callable[[VerbContext, Address, object, dict[str, Any], bool], VerbResult]
"""`(ctx, address, content, options, dry_run)`: a write of an address the space serves."""
AddressTest = Callable[[Address], bool]
NetworkTest = Callable[[Address, Mapping[str, Any]], bool]
"""Whether a call on this address with these options may wait on the network (the harness logs it first)."""


@dataclass(frozen=True, slots=True)
class ResourceForm:
    """One MCP resource template (or fixed resource) a space offers, as plain data."""

    name: str
    title: str
    uri: str
    """A URI template when `template`, else the resource's URI."""
    description: str | None = None
    mime_type: str | None = None
    template: bool = True


@dataclass(frozen=True, slots=True)
class ResourceBody:
    """What resources/read returns for one address: text, or bytes the resources layer sends as a blob."""

    mime_type: str | None
    text: str | None = None
    blob: bytes | None = None


ResourceRead = Callable[[VerbContext, Address], ResourceBody]


def every_address(address: Address) -> bool:
    return True


def no_network(address: Address, options: Mapping[str, Any]) -> bool:
    return False


@dataclass(frozen=True, kw_only=True, slots=True)
class Space:
    """One address space: which address kinds it serves and everything `read`, `write` and resources need of it."""

    name: str
    kinds: tuple[AddressKind, ...]
    """The `addresses.AddressKind` values it serves (the parser stays the one place that knows the syntax)."""

    read: ReadHandler | None = None
    read_options: tuple[str, ...] | None = None
    """The option keys a read accepts; the handler refuses any other key naming these. None: the form ignores
    options, as it did before the registry (tools, plan, transcripts, runs, hm://)."""
    reads: AddressTest = every_address
    """Which of its kinds' addresses it reads; the rest get the refusal naming what this build serves."""
    network_read: NetworkTest = no_network
    read_form: str = ""
    """Its part of the one-line "Supported: …" list in read's refusals."""
    read_line: str = ""
    """Its line(s) of the read verb's description (tools/list)."""
    read_details: str = ""
    """Its section of the read verb's full contract (`read ~/tools/read`)."""

    write: WriteHandler | None = None
    write_options: tuple[str, ...] | None = None
    """The option keys a write accepts (hm:// checks them per action, within this set)."""
    writes: AddressTest = every_address
    network_write: NetworkTest = no_network
    dry_run: bool = False
    """Whether a write takes the top-level `dryRun`."""
    write_form: str = ""
    write_line: str = ""
    write_details: str = ""

    resources: tuple[ResourceForm, ...] = ()
    resource_read: ResourceRead | None = None
    """How resources/read renders one of its addresses; None: it has no resources."""


def markdown_resource(read: ReadHandler) -> ResourceRead:
    """A resource read that is the space's own read, without options, as markdown."""

    def resource(ctx: VerbContext, address: Address) -> ResourceBody:
        return ResourceBody("text/markdown", read(ctx, address, {}, "markdown").text)

    return resource
