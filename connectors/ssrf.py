"""Where HTTP targets may connect: public addresses, plus networks the deployment allows.

Checked on the resolved address at send time (and the connection goes to exactly that
address), so a name that resolves to a private address, or re-resolves to one later, is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from kadence.target_allow import IPAddress, parse_allowed

METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6
        "100.100.100.200",  # Alibaba Cloud
    )
)


class AddressRefused(Exception):  # noqa: N818 - a verdict the target turns into an outcome
    pass


class AddressPolicy:
    def __init__(self, allow: Iterable[str] = ()) -> None:
        """`allow`: KADENCE_TARGET_ALLOW_CIDRS entries, a network with an optional port
        (kadence/target_allow.py)."""
        self.allow = tuple(parse_allowed(entry) for entry in allow)

    def why_refused(self, address: IPAddress, port: int | None = None) -> str | None:
        """None when `address` may be reached on `port`; else what kind of address it is. An
        allow-list entry with a port allows its network on that port only."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(entry.allows(address, port) for entry in self.allow):
            return None
        if address in METADATA:
            return "a cloud metadata address"
        for kind, flag in (
            ("an unspecified address", address.is_unspecified),
            ("a loopback address", address.is_loopback),
            ("a link-local address", address.is_link_local),
            ("a private address", address.is_private),
            ("a multicast address", address.is_multicast),
            ("a reserved address", address.is_reserved),
            ("a shared (carrier-grade NAT) address", address in _SHARED),
            ("a site-local address", address in _SITE_LOCAL),
            ("a 6to4 address (it may embed a private IPv4 address)", address in _SIX_TO_FOUR),
        ):
            if flag:
                return kind
        return None

    def resolve(self, host: str, port: int) -> IPAddress:
        """The first address of `host` if every address it resolves to may be reached."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise OSError(f"cannot resolve {host}: {exc.strerror}") from None
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
        for address in addresses:
            why = self.why_refused(address, port)
            if why is not None:
                raise AddressRefused(
                    f"{host} resolves to {address}, {why}; targets may not reach it on port "
                    f"{port} unless KADENCE_TARGET_ALLOW_CIDRS allows it"
                )
        return addresses[0]


_SHARED = ipaddress.ip_network("100.64.0.0/10")
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
"""Deprecated (RFC 3879) but still routed inside some networks."""
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
"""6to4 (RFC 3056): 2002:AABB:CCDD::/48 reaches the IPv4 address AA.BB.CC.DD through a relay,
private ones included; refused whole (6to4 is deprecated, RFC 7526)."""
