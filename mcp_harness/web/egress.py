"""Guarded egress: the one way the harness fetches a URL (DESIGN §6).

Every hop — the first request and each redirect — resolves its host, refuses addresses that reach inside the
host's own network (loopback, private, link-local, CGNAT, multicast, unspecified, reserved, cloud metadata, and
IPv6 forms that embed such an IPv4 address) unless `[web] allow_hosts` names the host as written in the URL, then
connects to the address it checked: the request goes to that IP with `Host` (and TLS SNI and certificate check)
still the name, so a second DNS answer cannot swap in another address. Redirects are followed here, never by the
HTTP library, so each hop passes the same gate. Bodies stream under a byte cap and a wall-clock deadline.

Fetches are synchronous: verbs call them on a worker thread (`read`, `write` fromUrl) or through
`anyio.to_thread` (`web_search`), and the timeouts bound how long a thread is held.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2

from mcp_harness.config import WebSettings
from mcp_harness.errors import BadRequest, Forbidden, TooLarge, Upstream

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
"""host, port → the IP addresses a connection could reach (as strings)."""

ALLOW_KEY = "[web] allow_hosts"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

_V4_RULES: tuple[tuple[str, str], ...] = (
    ("169.254.169.254/32", "cloud-metadata"),
    ("0.0.0.0/8", "unspecified"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "CGNAT"),
    ("169.254.0.0/16", "link-local"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
)
_V6_RULES: tuple[tuple[str, str], ...] = (
    ("fd00:ec2::254/128", "cloud-metadata"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("fc00::/7", "private"),
    ("ff00::/8", "multicast"),
    ("64:ff9b:1::/48", "private"),
)
_V4 = tuple((ipaddress.IPv4Network(net), rule) for net, rule in _V4_RULES)
_V6 = tuple((ipaddress.IPv6Network(net), rule) for net, rule in _V6_RULES)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_COMPAT = ipaddress.IPv6Network("::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries: mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`,
    or the deprecated compatible form `::a.b.c.d`."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _SIX_TO_FOUR:
        return ip.sixtofour
    return None


def blocked_rule(ip: IPAddress) -> str | None:
    """The rule that refuses `ip` (e.g. "loopback", "CGNAT"), or None for a public address."""
    if isinstance(ip, ipaddress.IPv4Address):
        for net, rule in _V4:
            if ip in net:
                return rule
        return None if ip.is_global else "reserved"
    for net, rule in _V6:
        if ip in net:
            return rule
    inner = embedded_ipv4(ip)
    if inner is not None:
        rule = blocked_rule(inner)
        return f"{rule} (IPv4 {inner} embedded in IPv6)" if rule else None
    return None if ip.is_global else "reserved"


def _system_resolver(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Upstream(f"Could not resolve {host}: {exc}.") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Target:
    """One checked hop: the URL as asked, and the address the connection is pinned to."""

    url: str
    host: str
    port: int
    address: str


@dataclass(frozen=True, slots=True)
class Body:
    """A body read under a cap."""

    data: bytes
    truncated: bool
    """True when the body went on past the cap and was cut there."""


class Response:
    """An open response after the last redirect: status, headers and a capped body reader."""

    def __init__(self, url: str, inner: httpx2.Response, deadline: float) -> None:
        self.url = url
        """The final URL (after redirects)."""
        self.status = inner.status_code
        self.headers = inner.headers
        self._inner = inner
        self._deadline = deadline

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def read(self, limit: int, *, refuse_over: bool = False) -> Body:
        """Read up to `limit` bytes; past it, cut (or, with `refuse_over`, raise TooLarge)."""
        declared = self.headers.get("content-length", "")
        if refuse_over and declared.isdigit() and int(declared) > limit:
            raise _too_large(self.url, limit)
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in self._inner.iter_bytes():
                if time.monotonic() > self._deadline:
                    raise Upstream(f"Fetching {self.url} took too long (over [web] total_timeout_s); stopped.")
                if size + len(chunk) > limit:
                    if refuse_over:
                        raise _too_large(self.url, limit)
                    chunks.append(chunk[: limit - size])
                    return Body(b"".join(chunks), truncated=True)
                chunks.append(chunk)
                size += len(chunk)
        except httpx2.TimeoutException:
            raise Upstream(f"Reading {self.url} timed out (no data for [web] read_timeout_s).") from None
        except httpx2.HTTPError as exc:
            raise Upstream(f"Reading {self.url} failed: {exc}.") from None
        return Body(b"".join(chunks), truncated=False)


def _too_large(url: str, limit: int) -> TooLarge:
    return TooLarge(f"{url} is larger than {limit} bytes, the limit set by [web] max_download_bytes.")


class Egress:
    """The guarded HTTP client. Stateless between fetches; one per harness."""

    def __init__(
        self, settings: WebSettings, resolver: Resolver | None = None, verify: ssl.SSLContext | None = None
    ) -> None:
        self.settings = settings
        self._resolve = resolver or _system_resolver
        self._verify = verify
        """TLS verification: httpx2's default trust store (built once: it costs ~90 ms) unless a test passes one."""
        self._verify_lock = threading.Lock()
        self._allowed_names = {h.strip().lower().rstrip(".") for h in settings.allow_hosts if _literal(h) is None}
        self._allowed_ips = {ip for ip in (_literal(h) for h in settings.allow_hosts) if ip is not None}

    def _ssl_context(self) -> ssl.SSLContext:
        with self._verify_lock:
            if self._verify is None:
                self._verify = httpx2.create_ssl_context(trust_env=False)
            return self._verify

    def allowed(self, host: str) -> bool:
        """Whether `[web] allow_hosts` names this host (a name as written in the URL, or an IP literal)."""
        literal = _literal(host)
        if literal is not None:
            return literal in self._allowed_ips
        return host.lower().rstrip(".") in self._allowed_names

    def check(self, url: str) -> Target:
        """Parse, resolve and vet one hop; raise BadRequest/Forbidden naming the rule and the key that allows it."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise BadRequest(f"Not a valid URL: {url} ({exc}).") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise BadRequest(f"Only http:// and https:// URLs can be fetched, not {scheme or 'a relative URL'}: {url}.")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise BadRequest(f"The URL {url} has no host.")
        if parts.username is not None or parts.password is not None:
            raise BadRequest(f"URLs with credentials are not fetched: {url}.")
        port = port or (443 if scheme == "https" else 80)
        literal = _literal(host)
        addresses = [str(literal)] if literal is not None else self._resolve(host, port)
        if not addresses:
            raise Upstream(f"Could not resolve {host}.")
        if not self.allowed(host):
            for address in addresses:
                ip = _literal(address)
                rule = "unparseable address" if ip is None else blocked_rule(ip)
                if rule is not None:
                    shown = host if literal is not None else f"{host} ({address})"
                    raise Forbidden(
                        f"Refusing to fetch {url}: {shown} is a {rule} address, which web fetches may not reach. "
                        f"To allow it, add {host!r} to {ALLOW_KEY} in the config."
                    )
        return Target(url=url, host=host, port=port, address=addresses[0])

    @contextmanager
    def open(
        self, url: str, *, accept: str = "*/*", params: dict[str, str] | None = None, method: str = "GET"
    ) -> Iterator[Response]:
        """GET (or `method`) `url`, following at most `[web] max_redirects` redirects, each hop checked; yield the
        last response.

        Only statuses below 400 and the final non-redirect are returned; the caller decides what an error means.
        """
        s = self.settings
        timeout = httpx2.Timeout(s.read_timeout_s, connect=s.connect_timeout_s)
        deadline = time.monotonic() + s.total_timeout_s
        headers = {"User-Agent": s.user_agent, "Accept": accept, "Accept-Encoding": "gzip, deflate"}
        if params:
            url = str(httpx2.URL(url, params=params))
        with httpx2.Client(
            timeout=timeout, follow_redirects=False, trust_env=False, verify=self._ssl_context()
        ) as client:
            current = url
            for hop in range(s.max_redirects + 1):
                target = self.check(current)
                response = self._send(client, target, headers, method)
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    response.close()
                    if hop == s.max_redirects:
                        raise Upstream(
                            f"{url} redirected more than {s.max_redirects} times ([web] max_redirects); stopped."
                        )
                    current = urljoin(current, location)
                    continue
                try:
                    yield Response(current, response, deadline)
                finally:
                    response.close()
                return

    def _send(
        self, client: httpx2.Client, target: Target, headers: dict[str, str], method: str = "GET"
    ) -> httpx2.Response:
        """Connect to the checked address while `Host`, SNI and certificate checks keep the name."""
        url = httpx2.URL(target.url)
        host_header = url.netloc.decode("ascii")
        request = client.build_request(
            method,
            url.copy_with(host=target.address),
            headers={**headers, "Host": host_header},
            extensions={"sni_hostname": url.raw_host.decode("ascii")},
        )
        try:
            return client.send(request, stream=True)
        except httpx2.ConnectTimeout:
            raise Upstream(f"Connecting to {target.url} timed out ([web] connect_timeout_s).") from None
        except httpx2.TimeoutException:
            raise Upstream(f"{target.url} did not answer in time ([web] read_timeout_s).") from None
        except httpx2.HTTPError as exc:
            raise Upstream(f"Could not fetch {target.url}: {exc}.") from None
