"""A Seed server's web API as the push and pull see it: queries, raw blobs by CID, and PublishBlobs (HYPERMEDIA §4).

Every request goes through the guarded egress (`web/egress.py`): reads through `Egress.open`, which checks each hop
and follows redirects itself; the PublishBlobs POST through `Egress.check` too (the same resolve-vet-pin gate), sent
to the checked address with `Host` and SNI kept the name, and never redirected (a body is not re-sent elsewhere).
Bodies are read under the `[hypermedia] max_request_bytes` cap, a raw blob under `max_blob_bytes`. The wire format is
`hypermedia/web_api.py`'s, the same functions the server side answers with.

Nothing read here is trusted as content: queries only name CIDs, and what is stored is the raw blob those CIDs
name, verified by `Node.ingest`.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx2

from mcp_harness.errors import BadRequest, Upstream
from mcp_harness.hypermedia import web_api
from mcp_harness.web.egress import Egress

_ssl_lock = threading.Lock()
_ssl: ssl.SSLContext | None = None


class SeedHttpError(Upstream):
    """A Seed server answered with an error status; `http_status` says which (the push decides on it)."""

    def __init__(self, message: str, http_status: int) -> None:
        super().__init__(message)
        self.http_status = http_status

    @property
    def permanent(self) -> bool:
        """The server refused what was sent, and would again: not worth retrying as is."""
        return 400 <= self.http_status < 500 and self.http_status not in (401, 403, 404, 408, 425, 429)


def _ssl_context() -> ssl.SSLContext:
    global _ssl
    with _ssl_lock:
        if _ssl is None:
            _ssl = httpx2.create_ssl_context(trust_env=False)
        return _ssl


class SeedClient:
    """One server: `base` is its URL (a site's web app, which serves /api and proxies /ipfs)."""

    def __init__(
        self, egress: Egress, base: str, *, token: str | None = None, max_bytes: int, max_blob_bytes: int | None = None
    ) -> None:
        self.egress = egress
        self.base = base.rstrip("/")
        self.token = token
        self.max_bytes = max_bytes
        self.max_blob_bytes = max_blob_bytes or max_bytes

    def query(self, key: str, params: dict[str, Any]) -> Any:
        """`GET /api/<key>`: the superjson-decoded output. Raises SeedHttpError (4xx/5xx) or Upstream."""
        url = f"{self.base}/api/{key}{web_api.encode_query(key, params)}"
        with self.egress.open(url, accept="application/json") as response:
            body = response.read(self.max_bytes, refuse_over=True).data
            if response.status >= 400:
                raise SeedHttpError(f"{url} answered {response.status}: {_error_text(body)}", response.status)
        try:
            return web_api.superjson_value(body)
        except BadRequest as error:
            raise Upstream(f"{url} answered something that is not superjson: {error.message}") from None

    def raw(self, cid: str) -> bytes | None:
        """`GET /ipfs/<cid>`: the block's bytes as served (to be verified by the caller), None when not there.
        Read under `max_blob_bytes`: a body over it raises TooLarge before more of it is held."""
        url = f"{self.base}/ipfs/{cid}"
        with self.egress.open(url, accept="application/octet-stream") as response:
            if response.status == 404:
                return None
            body = response.read(self.max_blob_bytes, refuse_over=True).data
            if response.status >= 400:
                raise SeedHttpError(f"{url} answered {response.status}: {_error_text(body)}", response.status)
        return body

    def publish(self, blobs: Sequence[tuple[str | None, bytes]]) -> list[str]:
        """`POST /api/PublishBlobs` with `{blobs: [{cid, data}]}`; the CIDs the server stored."""
        url = f"{self.base}/api/PublishBlobs"
        headers = {"Content-Type": "application/cbor", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        status, body = self._post(url, web_api.publish_blobs_body(blobs), headers)
        if status >= 400:
            raise SeedHttpError(f"{url} answered {status}: {_error_text(body)}", status)
        try:
            value = web_api.superjson_value(body)
        except BadRequest:
            value = None
        cids = value.get("cids") if isinstance(value, dict) else None
        return [str(c) for c in cids] if isinstance(cids, list) else []

    def _post(self, url: str, content: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        s = self.egress.settings
        target = self.egress.check(url)  # the SSRF gate: resolve, vet every address, pin the one checked
        deadline = time.monotonic() + s.total_timeout_s
        parsed = httpx2.URL(target.url)
        request_headers = {
            "User-Agent": s.user_agent,
            **headers,
            "Host": parsed.netloc.decode("ascii"),
        }
        timeout = httpx2.Timeout(s.read_timeout_s, connect=s.connect_timeout_s)
        verify: ssl.SSLContext | bool = _ssl_context() if parsed.scheme == "https" else False
        try:
            with httpx2.Client(timeout=timeout, follow_redirects=False, trust_env=False, verify=verify) as client:
                request = client.build_request(
                    "POST",
                    parsed.copy_with(host=target.address),
                    headers=request_headers,
                    content=content,
                    extensions={"sni_hostname": parsed.raw_host.decode("ascii")},
                )
                with _send(client, request) as r:
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in r.iter_bytes():
                        size += len(chunk)
                        if size > self.max_bytes or time.monotonic() > deadline:
                            raise Upstream(f"{url} answered too much or too slowly; stopped reading.")
                        chunks.append(chunk)
                    return r.status_code, b"".join(chunks)
        except httpx2.TimeoutException:
            raise Upstream(f"{url} did not answer in time ([web] read_timeout_s).") from None
        except httpx2.HTTPError as exc:
            raise Upstream(f"Could not reach {url}: {exc}.") from None


class _send:
    """`client.send(request, stream=True)` as a context manager that closes the response."""

    def __init__(self, client: httpx2.Client, request: httpx2.Request) -> None:
        self._client = client
        self._request = request
        self._response: httpx2.Response | None = None

    def __enter__(self) -> httpx2.Response:
        self._response = self._client.send(self._request, stream=True)
        return self._response

    def __exit__(self, *exc: object) -> None:
        if self._response is not None:
            self._response.close()


def _error_text(body: bytes) -> str:
    """The `{"error": …}` message of an error body, else its first characters."""
    try:
        value = json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace") or "(no body)"
    if isinstance(value, dict) and isinstance(value.get("error"), str):
        return value["error"]
    return json.dumps(value)[:200]


__all__ = ["SeedClient", "SeedHttpError"]
