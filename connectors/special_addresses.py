"""The special-use address ranges HTTP and SQS targets may not reach (unless the deployment
allows them, connectors/ssrf.py): the policy's own table, so its verdict is the same on every
Python release.

`ipaddress`'s `is_private`, `is_global` and `is_reserved` are not a policy: their verdict on
some ranges changed in Python 3.11.10 and 3.12.4 (python/cpython gh-113171: 192.0.0.9,
192.0.0.10, 2001:1::1, 2001:3::/32, 2001:4:112::/48, 2001:20::/28, 64:ff9b:1::/48 ...), and
they never knew a host such as Azure's WireServer. The table below is read off the registries
(entries checked 2026-12):

- IANA IPv4 Special-Purpose Address Registry (RFC 6890, updated by RFC 8190),
  https://www.iana.org/assignments/iana-ipv4-special-registry/ ; with 224.0.0.0/4 (multicast,
  RFC 5771) and 240.0.0.0/4 (reserved, RFC 1112) from the IANA IPv4 Address Space Registry.
- IANA IPv6 Special-Purpose Address Registry (RFC 6890, updated by RFC 8190),
  https://www.iana.org/assignments/iana-ipv6-special-registry/ ; with ff00::/8 (multicast,
  RFC 4291) and fec0::/10 (site-local, deprecated by RFC 3879 but still routed in places) from
  the IANA IPv6 Address Space Registry, which allocates only 2000::/3 as global unicast: every
  IPv6 address outside it is refused too.

Every entry is refused, also those the registries mark globally reachable (the AS112 and AMT
anycast ranges, 192.0.0.9/10, 2001:1::1/2): none hosts a tenant's webhook. Addresses that embed
an IPv4 address are judged as that address by the policy (`reached`): IPv4-mapped
(::ffff:0:0/96) and NAT64's well-known prefix (64:ff9b::/96, RFC 6052, the IPv4 address in the
last 32 bits). NAT64's local-use prefix (64:ff9b:1::/48, RFC 8215) is refused whole: where the
IPv4 address sits in it is each network's choice. 6to4 (2002::/16, RFC 3056) is refused whole
(it is deprecated, RFC 7526, and reaches private IPv4 addresses through any relay).
"""

from __future__ import annotations

import ipaddress

from kadence.target_allow import IPAddress

UNSPECIFIED = "an unspecified address"
PRIVATE = "a private address"
LOOPBACK = "a loopback address"
LINK_LOCAL = "a link-local address"
SHARED = "a shared (carrier-grade NAT) address"
IETF = "an IETF protocol assignment address"
DOCUMENTATION = "a documentation address"
AS112 = "an AS112 (DNS sink) address"
AMT = "an AMT relay anycast address"
BENCHMARKING = "a benchmarking address"
MULTICAST = "a multicast address"
RESERVED = "a reserved address"

IPV4: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", UNSPECIFIED),  # "this network" (RFC 791), 0.0.0.0/32 "this host"
    ("10.0.0.0/8", PRIVATE),  # RFC 1918
    ("100.64.0.0/10", SHARED),  # RFC 6598
    ("127.0.0.0/8", LOOPBACK),  # RFC 1122
    ("169.254.0.0/16", LINK_LOCAL),  # RFC 3927
    ("172.16.0.0/12", PRIVATE),  # RFC 1918
    ("192.0.0.0/24", IETF),  # RFC 6890: 192.0.0.0/29 DS-Lite, .8 dummy, .9 PCP, .10 TURN, .170
    ("192.0.2.0/24", DOCUMENTATION),  # TEST-NET-1, RFC 5737
    ("192.31.196.0/24", AS112),  # RFC 7535
    ("192.52.193.0/24", AMT),  # RFC 7450
    ("192.88.99.0/24", "a 6to4 relay anycast address (deprecated, RFC 7526)"),
    ("192.168.0.0/16", PRIVATE),  # RFC 1918
    ("192.175.48.0/24", AS112),  # direct delegation, RFC 7534
    ("198.18.0.0/15", BENCHMARKING),  # RFC 2544
    ("198.51.100.0/24", DOCUMENTATION),  # TEST-NET-2
    ("203.0.113.0/24", DOCUMENTATION),  # TEST-NET-3
    ("224.0.0.0/4", MULTICAST),  # RFC 5771
    ("255.255.255.255/32", "the limited broadcast address"),  # RFC 919; before 240/4
    ("240.0.0.0/4", RESERVED),  # RFC 1112
)

IPV6: tuple[tuple[str, str], ...] = (
    ("::/128", UNSPECIFIED),  # RFC 4291
    ("::1/128", LOOPBACK),  # RFC 4291
    ("::ffff:0:0/96", "an IPv4-mapped address"),  # judged as its IPv4 address before this
    ("64:ff9b::/96", "a NAT64 address"),  # RFC 6052: judged as its IPv4 address before this
    ("64:ff9b:1::/48", "a local-use NAT64 address (RFC 8215)"),
    ("100::/64", "a discard-only address"),  # RFC 6666 (100:0:0:1::/64, RFC 9780, is beside it)
    # 2001::/23 with its sub-ranges: 2001::/32 Teredo (embeds an IPv4 address), 2001:1::1-3
    # anycast, 2001:2::/48 benchmarking, 2001:3::/32 AMT, 2001:4:112::/48 AS112, 2001:10::/28
    # ORCHID, 2001:20::/28 ORCHIDv2, 2001:30::/28 drone DETs.
    ("2001::/23", IETF),
    ("2001:db8::/32", DOCUMENTATION),  # RFC 3849
    ("2002::/16", "a 6to4 address (it may embed a private IPv4 address)"),  # RFC 3056
    ("2620:4f:8000::/48", AS112),  # RFC 7534
    ("3fff::/20", DOCUMENTATION),  # RFC 9637
    ("5f00::/16", "a segment routing (SRv6) SID"),  # RFC 9602
    ("fc00::/7", PRIVATE),  # unique local, RFC 4193
    ("fe80::/10", LINK_LOCAL),  # RFC 4291
    ("fec0::/10", "a site-local address (deprecated, RFC 3879)"),
    ("ff00::/8", MULTICAST),  # RFC 4291
)
OUTSIDE_GLOBAL_UNICAST = "an address outside IPv6 global unicast (2000::/3)"

NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def _ranges(table: tuple[tuple[str, str], ...]) -> tuple[tuple[int, int, str], ...]:
    """(first, last, kind) as integers: one comparison pair per entry, nothing else asked of
    `ipaddress` at check time."""
    networks = ((ipaddress.ip_network(net), kind) for net, kind in table)
    return tuple((int(n.network_address), int(n.broadcast_address), k) for n, k in networks)


_IPV4 = _ranges(IPV4)
_IPV6 = _ranges(IPV6)


def reached(address: IPAddress) -> IPAddress:
    """The address a connection to `address` reaches: the IPv4 address an IPv4-mapped or a
    NAT64 (64:ff9b::/96) address embeds, else `address` itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    return address


def special_use(address: IPAddress) -> str | None:
    """What kind of special-use address `address` is (the first entry of the table holding
    it), or None for an address a target may reach."""
    value = int(address)
    if isinstance(address, ipaddress.IPv4Address):
        return next((kind for first, last, kind in _IPV4 if first <= value <= last), None)
    kind = next((kind for first, last, kind in _IPV6 if first <= value <= last), None)
    if kind is None and not (
        int(_GLOBAL_UNICAST.network_address) <= value <= int(_GLOBAL_UNICAST.broadcast_address)
    ):
        return OUTSIDE_GLOBAL_UNICAST
    return kind
