"""Where HTTP targets may connect: public addresses, plus networks the deployment allows.

Checked on the resolved address at send time (and the connection goes to exactly that
address), so a name that resolves to a private address, or re-resolves to one later, is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

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
        self.allow: tuple[IPNetwork, ...] = tuple(
            ipaddress.ip_network(c, strict=False) for c in allow
        )

    def why_refused(self, address: IPAddress) -> str | None:
        """None when `address` may be reached; else what kind of address it is."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in net for net in self.allow):
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
            why = self.why_refused(address)
            if why is not None:
                raise AddressRefused(
                    f"{host} resolves to {address}, {why}; targets may not reach it unless "
                    "KADENCE_TARGET_ALLOW_CIDRS allows it"
                )
        return addresses[0]


_SHARED = ipaddress.ip_network("100.64.0.0/10")
