"""A real IPFS gateway on loopback for the `ipfs://` suites: blocks by CID, served the trustless way (`?format=raw`
→ `application/vnd.ipld.raw`) or, as a Seed node does, the whole file; optionally lying about some of them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from mcp_harness.config import load_settings
from mcp_harness.harness import Harness
from mcp_harness.hypermedia.cid import CID
from mcp_harness.hypermedia.unixfs import import_bytes, read_file


@dataclass
class Gateway:
    """What the gateway holds and how it answers; `requests` records every path asked for."""

    blocks: dict[CID, bytes] = field(default_factory=dict[CID, bytes])
    whole_files: bool = False
    """Answer like a Seed node: the reassembled file, never a raw block."""
    tampered: dict[CID, bytes] = field(default_factory=dict[CID, bytes])
    """CIDs answered with these bytes instead."""
    requests: list[str] = field(default_factory=list[str])
    url: str = ""

    def add(self, data: bytes) -> CID:
        cid, blocks = import_bytes(data)
        self.blocks.update((b.cid, b.data) for b in blocks)
        return cid

    def _body(self, cid: CID, raw: bool) -> tuple[bytes, str] | None:
        if cid in self.tampered:
            return self.tampered[cid], "application/vnd.ipld.raw" if raw else "application/octet-stream"
        if cid not in self.blocks:
            return None
        if raw:
            return self.blocks[cid], "application/vnd.ipld.raw"
        return b"".join(read_file(cid, self.blocks.__getitem__)), "application/octet-stream"


@contextmanager
def gateway_server(gateway: Gateway) -> Iterator[Gateway]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook
            parts = urlsplit(self.path)
            gateway.requests.append(self.path)
            raw = not gateway.whole_files and parse_qs(parts.query).get("format") == ["raw"]
            try:
                cid = CID.parse(parts.path.removeprefix("/ipfs/"))
                found = gateway._body(cid, raw)  # pyright: ignore[reportPrivateUsage]
            except ValueError:
                found = None
            if found is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body, kind = found
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    gateway.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield gateway
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def harness_with_gateways(data_dir: Path, *gateways: str) -> Harness:
    """A harness that fetches from these loopback gateways (allowed through the guarded client by name)."""
    return Harness(
        load_settings(data_dir=data_dir, web={"allow_hosts": ["127.0.0.1"]}, ipfs={"gateways": list(gateways)})
    )
