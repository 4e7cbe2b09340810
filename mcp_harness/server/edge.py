"""Addresses at the HTTP edge: the bind address resolved (loopback is decided from every address it resolves to,
never from its spelling), and `Host` / `Origin` headers parsed as authorities and compared exactly.

A header that does not parse (userinfo, spaces, a path, a port that is not a number, a non-canonical IPv4 such as
`127.1`) is refused, never prefix-matched. Loopback names (`localhost`, `127.0.0.1`, `[::1]`) are allowed with any
port or none; a configured entry matches its host exactly and its port exactly, or any port when it ends in `:*`.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any, Literal

from mcp_harness.errors import BadRequest, HarnessError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_AUTHORITY = re.compile(rf"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>{_LABEL}(?:\.{_LABEL})*))(?::(?P<port>[0-9]{{1,5}}))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)")
_DEFAULT_PORTS = {"http": 80, "https": 443}
Port = int | None | Literal["*"]


@dataclass(frozen=True, slots=True)
class Authority:
    host: str
    """A lower-case DNS name, a dotted IPv4 address, or a compressed IPv6 address (without brackets)."""
    port: Port = None


def parse_authority(text: str) -> Authority | None:
    """`host[:port]` as a Host header carries it, or None when it is anything else."""
    match = _AUTHORITY.fullmatch(text.lower())
    if match is None:
        return None
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and not 0 < port < 65536:
        return None
    if match["v6"] is not None:
        try:
            return Authority(str(ipaddress.IPv6Address(match["v6"])), port)
        except ValueError:
            return None
    name: str = match["name"]
    if all(label.isdigit() for label in name.split(".")):
        try:  # a number is an IPv4 address in its one canonical spelling, or nothing
            ipaddress.IPv4Address(name)
        except ValueError:
            return None
    return Authority(name, port)


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: Port = None


def parse_origin(text: str) -> Origin | None:
    """`scheme://host[:port]` (http or https, no userinfo, no path), its default port dropped; else None."""
    match = _ORIGIN.fullmatch(text.lower())
    authority = parse_authority(match["authority"]) if match is not None else None
    if match is None or authority is None:
        return None
    scheme = match["scheme"]
    port = None if authority.port == _DEFAULT_PORTS[scheme] else authority.port
    return Origin(scheme, authority.host, port)


def _rule(entry: str, parse: type[Authority] | type[Origin]) -> Authority | Origin | None:
    wildcard = entry.endswith(":*")
    text = entry[:-2] if wildcard else entry
    parsed = parse_authority(text) if parse is Authority else parse_origin(text)
    if parsed is None or (wildcard and parsed.port is not None):
        return None
    if wildcard:
        return Authority(parsed.host, "*") if isinstance(parsed, Authority) else Origin(parsed.scheme, parsed.host, "*")
    return parsed


def _port_matches(rule: Port, port: Port) -> bool:
    return rule == "*" or rule == port


class EdgeRules:
    """Which Host and Origin values the guard lets through."""

    def __init__(self, *, bind_host: str, check_hosts: bool, allowed_hosts: list[str], allowed_origins: list[str]):
        self.check_hosts = check_hosts
        bind = parse_authority(f"[{bind_host}]" if ":" in bind_host else bind_host)
        self._bind_host = bind.host if bind is not None else None
        self._hosts: list[Authority] = []
        for entry in allowed_hosts:
            rule = _rule(entry, Authority)
            if not isinstance(rule, Authority):
                raise BadRequest(f"[http] allowed_hosts entry {entry!r} is not HOST, HOST:PORT or HOST:*.")
            self._hosts.append(rule)
        self._origins: list[Origin] = []
        for entry in allowed_origins:
            rule = _rule(entry, Origin)
            if not isinstance(rule, Origin):
                raise BadRequest(
                    f"[http] allowed_origins entry {entry!r} is not SCHEME://HOST, SCHEME://HOST:PORT or "
                    "SCHEME://HOST:* (http or https, no path)."
                )
            self._origins.append(rule)

    def host_allowed(self, header: str | None) -> bool:
        if not self.check_hosts:
            return True
        host = parse_authority(header) if header is not None else None
        if host is None:
            return False
        if host.host in LOOPBACK_NAMES or host.host == self._bind_host:
            return True
        return any(rule.host == host.host and _port_matches(rule.port, host.port) for rule in self._hosts)

    def origin_allowed(self, header: str) -> bool:
        origin = parse_origin(header)
        if origin is None:
            return False
        if origin.host in LOOPBACK_NAMES:
            return True
        return any(
            rule.scheme == origin.scheme and rule.host == origin.host and _port_matches(rule.port, origin.port)
            for rule in self._origins
        )


Resolved = list[tuple[socket.AddressFamily, tuple[Any, ...]]]


def resolve(host: str, port: int) -> Resolved:
    """Every (family, address) `host` resolves to; a name that does not resolve is one line (`HarnessError`)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise HarnessError(f"Cannot resolve {host}: {exc.strerror}.") from None
    return [(family, sockaddr) for family, _, _, _, sockaddr in infos]


def all_loopback(resolved: Resolved) -> bool:
    """Whether every address is a loopback one (`0.0.0.0`, `::` and any address of another interface are not)."""
    return all(_is_loopback(str(sockaddr[0])) for _, sockaddr in resolved)


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


def resolves_to_loopback(host: str) -> bool:
    return all_loopback(resolve(host, 0))


_BIND_REASONS = {
    errno.EADDRINUSE: "the port is already in use (is another server running there?)",
    errno.EADDRNOTAVAIL: "that address is not one of this machine's",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
}


def bind(resolved: Resolved, where: str) -> socket.socket:
    """A socket bound to the first resolved address, the one whose loopback-ness was checked (binding by name would
    resolve it again); a port in use or an address that is not local is one line (`HarnessError`)."""
    family, sockaddr = resolved[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(2048)  # connections queue from here on, so the banner printed next is already true
    except OSError as exc:
        sock.close()
        reason = _BIND_REASONS.get(exc.errno or 0, exc.strerror or str(exc))
        raise HarnessError(f"Cannot listen on {where}: {reason}.") from None
    return sock


__all__ = [
    "LOOPBACK_NAMES",
    "Authority",
    "EdgeRules",
    "Origin",
    "all_loopback",
    "bind",
    "parse_authority",
    "parse_origin",
    "resolve",
    "resolves_to_loopback",
]
