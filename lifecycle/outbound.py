"""Where the service may send a request: the one rule for every address an admin gives it (a processor's URL, a
site-database server's host, ALERT_WEBHOOK_URL), checked when the address is registered and again before each use,
since what a name resolves to can change between the two.

A URL must be `https`. Every address its host resolves to must be a public one: loopback, private, link-local
(169.254.169.254, the cloud metadata service, among them), multicast, reserved and unspecified addresses are
refused, so an address cannot turn the service into a probe of its own network. OUTBOUND_ALLOWED_HOSTS names the
exceptions (host names, addresses or networks, comma-separated); OUTBOUND_ALLOW_LOOPBACK, a development setting that
`make run` and the tests turn on, admits loopback addresses, and plain `http` to them.

A name is resolved here, then again by the client that connects: a name whose DNS answer changes within that
moment is not caught. Requests never follow redirects (the HTTP client's default, kept), so a public address
cannot send one on to a private one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(ValueError):
    """The address may not be called; the message says why, naming the address but never a credential."""


@dataclass(frozen=True)
class OutboundRule:
    allowed_hosts: frozenset[str] = frozenset()
    allow_loopback: bool = False

    @classmethod
    def of(cls, allowed_hosts: str, allow_loopback: bool) -> OutboundRule:
        hosts = frozenset(host.strip().lower() for host in allowed_hosts.split(",") if host.strip())
        return cls(hosts, allow_loopback)

    async def check_url(self, url: str) -> None:
        """Refuse `url` unless it is https (http only to an admitted loopback host) to admitted addresses."""
        parts = urlsplit(url)
        try:
            host, port = (parts.hostname or "").lower(), parts.port
        except ValueError as err:
            raise OutboundRefused(f"{_shown(url)}: {err}") from None
        if not host:
            raise OutboundRefused(f"{_shown(url)} names no host")
        if parts.scheme not in ("https", "http"):
            raise OutboundRefused(f"{_shown(url)} is not an https URL")
        port = port or (443 if parts.scheme == "https" else 80)
        if parts.scheme == "http":
            loopback = self.allow_loopback and all(address.is_loopback for address in await _resolve(host, port))
            if not loopback:
                raise OutboundRefused(
                    f"{_shown(url)} is plain http: only https is allowed, and http to loopback only with"
                    " OUTBOUND_ALLOW_LOOPBACK (development)"
                )
        await self.check_host(host, port)

    async def check_host(self, host: str, port: int) -> list[IpAddress]:
        """Every address `host` resolves to, once each is admitted; OutboundRefused at the first that is not."""
        host = host.lower().strip("[]")
        addresses = await _resolve(host, port)
        if self._allowed(host, addresses):
            return addresses
        for address in addresses:
            if address.is_loopback and self.allow_loopback:
                continue
            if not address.is_global or address.is_multicast:
                raise OutboundRefused(
                    f"{host} resolves to {address}, a {_kind(address)} address; name it in OUTBOUND_ALLOWED_HOSTS to"
                    " allow it"
                )
        return addresses

    def _allowed(self, host: str, addresses: Iterable[IpAddress]) -> bool:
        if host in self.allowed_hosts:
            return True
        networks = [network for entry in self.allowed_hosts if (network := _network(entry)) is not None]
        return bool(networks) and all(any(address in network for network in networks) for address in addresses)


async def _resolve(host: str, port: int) -> list[IpAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        raise OutboundRefused(f"{host} does not resolve: {err}") from err
    # An IPv6 scope (fe80::1%eth0) is not part of the address.
    return sorted({ipaddress.ip_address(str(entry[4][0]).split("%")[0]) for entry in found}, key=str)


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return None


def _kind(address: IpAddress) -> str:
    for kind in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return "non-public"


def _shown(url: str) -> str:
    """The URL without its user information, query or fragment, which may hold a credential."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{parts.path}"
