"""Entries of KADENCE_TARGET_ALLOW_CIDRS (every tenant's targets) and of
KADENCE_TARGET_ALLOW_CIDRS_BY_TENANT (one tenant's): a network HTTP and SQS targets may reach
although it is private, on any port or on one port only. A cloud metadata address needs an
entry naming exactly it (a /32 or /128; connectors/ssrf.py).

    "10.20.0.0/16"            any port
    "10.20.0.0/16:8443"       port 8443 only
    "fd00:1::/64"             any port (IPv6)
    "[fd00:1::/64]:8443"      port 8443 only (IPv6: brackets, as in URLs)

Settings validate the entries with it and the SSRF policy (connectors/ssrf.py) applies them.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

FORMS = '"10.0.0.0/8", "10.0.0.0/8:8443", "fd00::/8" or "[fd00::/8]:8443"'


@dataclass(frozen=True, slots=True)
class AllowedNetwork:
    network: IPNetwork
    port: int | None = None
    """None: every port."""

    def allows(self, address: IPAddress, port: int | None) -> bool:
        return address in self.network and (self.port is None or self.port == port)


def parse_allowed(entry: str) -> AllowedNetwork:
    """One entry; ValueError naming the entry and the accepted forms when it is none of them."""
    text = entry.strip()
    network, port = text, None
    if text.startswith("["):
        network, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"{entry!r}: expected [<IPv6 network>]:<port>; forms: {FORMS}")
        port = _port(entry, rest[1:])
    elif text.count(":") == 1:  # IPv4 with a port; IPv6 has at least two colons
        network, _, port_text = text.partition(":")
        port = _port(entry, port_text)
    try:
        return AllowedNetwork(ipaddress.ip_network(network, strict=False), port)
    except ValueError:
        raise ValueError(f"{entry!r} is not a network; forms: {FORMS}") from None


def _port(entry: str, text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65_535:
        raise ValueError(f"{entry!r}: the port must be 1..65535; forms: {FORMS}")
    return int(text)
