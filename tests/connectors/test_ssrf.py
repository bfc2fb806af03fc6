"""Which addresses HTTP targets may reach."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest
from pydantic import ValidationError

from connectors.http_dns import Resolver
from connectors.ssrf import AddressPolicy, AddressRefused
from kadence.settings import KadenceSettings
from kadence.target_allow import AllowedNetwork, parse_allowed

VERDICTS: list[tuple[str, str | None]] = [
    # (address, a word of the refusal; None: a target may reach it)
    ("127.0.0.1", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("172.32.0.1", None),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "metadata"),
    ("169.254.10.10", "link-local"),
    ("100.100.100.200", "metadata"),
    ("168.63.129.16", "metadata"),  # Azure WireServer: a public address
    ("168.63.129.17", None),
    ("100.64.0.1", "shared"),
    ("100.127.255.254", "shared"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("192.0.0.192", "IETF"),  # 192.0.0.0/24: is_private said nothing of it before 3.11.10
    ("192.0.0.9", "IETF"),  # PCP anycast: is_global since 3.11.10, refused here all the same
    ("192.0.0.10", "IETF"),
    ("192.0.2.1", "documentation"),
    ("192.31.196.1", "AS112"),
    ("192.52.193.1", "AMT"),
    ("192.88.99.1", "6to4"),
    ("192.175.48.1", "AS112"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.7", "documentation"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("93.184.215.14", None),
    ("1.1.1.1", None),
    ("8.8.8.8", None),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::ffff:10.0.0.1", "private"),  # IPv4-mapped IPv6 is the IPv4 address
    ("::ffff:169.254.169.254", "metadata"),
    ("::ffff:168.63.129.16", "metadata"),
    ("::ffff:1.1.1.1", None),
    ("::a00:1", "outside IPv6 global unicast"),  # IPv4-compatible (deprecated): no mapping
    ("64:ff9b::a00:1", "private"),  # NAT64 to 10.0.0.1
    ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 to 169.254.169.254
    ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b::c000:c0", "IETF"),  # NAT64 to 192.0.0.192
    ("64:ff9b::101:101", None),  # NAT64 to 1.1.1.1: a public host on an IPv6-only network
    ("64:ff9b:1::a00:1", "local-use NAT64"),  # RFC 8215: refused whole
    ("64:ff9b:1::101:101", "local-use NAT64"),
    ("100::1", "discard-only"),
    ("2001::1", "IETF"),  # Teredo
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "IETF"),  # Teredo embedding an obfuscated IPv4
    ("2001:1::1", "IETF"),  # PCP anycast: is_private changed in 3.11.10
    ("2001:2::1", "IETF"),
    ("2001:3::1", "IETF"),
    ("2001:4:112::1", "IETF"),
    ("2001:10::1", "IETF"),
    ("2001:20::1", "IETF"),
    ("2001:1ff:ffff::1", "IETF"),
    ("2001:200::1", None),  # just past 2001::/23: WIDE, Japan
    ("2001:db8::1", "documentation"),
    ("2002:a00:1::1", "6to4"),  # 6to4 relay to 10.0.0.1
    ("2002:a9fe:a9fe::1", "6to4"),  # ... to 169.254.169.254
    ("2002:808:808::1", "6to4"),  # refused whole, even to a public IPv4
    ("2620:4f:8000::1", "AS112"),
    ("3fff::1", "documentation"),
    ("3fff:fff::1", "documentation"),
    ("3fff:1000::1", None),
    ("5f00::1", "SRv6"),
    ("fc00::1", "private"),
    ("fd00:ec2::254", "metadata"),
    ("fd20:ce::254", "metadata"),
    ("fe80::1", "link-local"),
    ("fec0::1", "site-local"),
    ("feff:ffff::1", "site-local"),
    ("ff02::1", "multicast"),
    ("4000::1", "outside IPv6 global unicast"),
    ("1::1", "outside IPv6 global unicast"),
    ("2606:4700:4700::1111", None),
    ("2a00:1450:4001::200e", None),
]


def _verdicts() -> list[tuple[str, str | None]]:
    """Each address of the table with the refusal a fresh policy gives (no verdict kept)."""
    policy = AddressPolicy()
    return [(a, policy.why_refused(ipaddress.ip_address(a))) for a, _ in VERDICTS]


@pytest.mark.parametrize(("address", "kind"), VERDICTS)
def test_the_verdict_on_each_special_address(address: str, kind: str | None) -> None:
    why = AddressPolicy().why_refused(ipaddress.ip_address(address))
    if kind is None:
        assert why is None
    else:
        assert why is not None and kind in why, why


_VERDICT_FLAGS = (
    "is_private",
    "is_global",
    "is_reserved",
    "is_loopback",
    "is_link_local",
    "is_multicast",
    "is_unspecified",
    "is_site_local",
)


@pytest.mark.parametrize("flag_says", [False, True])
def test_the_verdict_does_not_ask_ipaddress(
    monkeypatch: pytest.MonkeyPatch, flag_says: bool
) -> None:
    """The verdicts stay what they are whatever `ipaddress` says of an address or a network
    (its is_private and the like changed in Python 3.11.10 and 3.12.4)."""
    expected = _verdicts()
    assert [(a, why is None) for a, why in expected] == [(a, k is None) for a, k in VERDICTS]
    for cls in (
        ipaddress.IPv4Address,
        ipaddress.IPv6Address,
        ipaddress.IPv4Network,
        ipaddress.IPv6Network,
    ):
        for flag in _VERDICT_FLAGS:
            if hasattr(cls, flag):
                monkeypatch.setattr(cls, flag, property(lambda _self: flag_says))
    assert ipaddress.ip_address("10.0.0.1").is_private is flag_says
    assert _verdicts() == expected


def test_a_metadata_address_needs_an_entry_naming_exactly_it() -> None:
    wire = ipaddress.ip_address("168.63.129.16")
    assert AddressPolicy(["168.63.0.0/16", "0.0.0.0/0"]).why_refused(wire) is not None
    assert AddressPolicy(["168.63.129.16/32"]).why_refused(wire) is None
    nat64 = ipaddress.ip_address("64:ff9b::a83f:8110")  # the same host through NAT64
    assert AddressPolicy(["64:ff9b::/96"]).why_refused(nat64) == "a cloud metadata address"
    assert AddressPolicy(["168.63.129.16/32"]).why_refused(nat64) is None


def test_an_allow_entry_judges_the_ipv4_address_a_nat64_one_reaches() -> None:
    policy = AddressPolicy(["10.20.0.0/16"])
    assert policy.why_refused(ipaddress.ip_address("64:ff9b::a14:505")) is None  # 10.20.5.5
    assert policy.why_refused(ipaddress.ip_address("64:ff9b::a15:505")) == "a private address"
    local_use = ipaddress.ip_address("64:ff9b:1::a14:505")
    assert AddressPolicy(["64:ff9b:1::/48"]).why_refused(local_use) is None


def test_the_deployment_can_allow_a_network() -> None:
    policy = AddressPolicy(["10.20.0.0/16", "127.0.0.1/32"])
    assert policy.why_refused(ipaddress.ip_address("10.20.5.5")) is None
    assert policy.why_refused(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.why_refused(ipaddress.ip_address("10.21.0.1")) is not None
    assert policy.why_refused(ipaddress.ip_address("169.254.169.254")) is not None


def test_a_name_is_checked_on_what_it_resolves_to() -> None:
    with pytest.raises(AddressRefused, match=r"localhost resolves to .*loopback.*ALLOW_CIDRS"):
        asyncio.run(Resolver(AddressPolicy()).addresses("localhost", 80, "acme"))
    allowed = Resolver(AddressPolicy(["127.0.0.0/8", "::1/128"]))
    found = asyncio.run(allowed.addresses("localhost", 80, "acme"))
    assert {str(a) for a in found} <= {"127.0.0.1", "::1"}


def test_an_unresolvable_name_is_an_os_error_not_a_refusal() -> None:
    with pytest.raises(OSError, match="cannot resolve"):
        asyncio.run(Resolver(AddressPolicy()).addresses("no-such-host.invalid", 80, "acme"))


def test_an_allowed_network_with_a_port_allows_that_port_only() -> None:
    policy = AddressPolicy(["10.20.0.0/16:8443", "[fd00:1::/64]:443", "192.168.1.0/24"])
    private, v6 = ipaddress.ip_address("10.20.5.5"), ipaddress.ip_address("fd00:1::5")
    assert policy.why_refused(private, 8443) is None
    assert policy.why_refused(private, 80) == "a private address"
    assert policy.why_refused(private) is not None  # no port known: not allowed
    assert policy.why_refused(v6, 443) is None
    assert policy.why_refused(v6, 8443) is not None
    assert policy.why_refused(ipaddress.ip_address("192.168.1.9"), 1234) is None


def test_a_refusal_names_the_port() -> None:
    loopback = [ipaddress.ip_address("127.0.0.1")]
    with pytest.raises(AddressRefused, match=r"on port 8080 unless"):
        AddressPolicy(["127.0.0.0/8:8443"]).check_all("127.0.0.1", 8080, loopback)
    AddressPolicy(["127.0.0.0/8:8443"]).check_all("127.0.0.1", 8443, loopback)


@pytest.mark.parametrize(
    ("entry", "network", "port"),
    [
        ("10.0.0.0/8", "10.0.0.0/8", None),
        ("10.0.0.0/8:8443", "10.0.0.0/8", 8443),
        (" 10.0.0.1:80 ", "10.0.0.1/32", 80),
        ("fd00::/8", "fd00::/8", None),
        ("[fd00::/8]:8443", "fd00::/8", 8443),
    ],
)
def test_allow_entries_parse(entry: str, network: str, port: int | None) -> None:
    assert parse_allowed(entry) == AllowedNetwork(ipaddress.ip_network(network), port)


@pytest.mark.parametrize(
    "entry",
    [
        "10.0.0.0/8:",
        "10.0.0.0/8:0",
        "10.0.0.0/8:65536",
        "10.0.0.0/8:http",
        "[fd00::/8]",
        "[fd00::/8]8443",
        "fd00::/8:8443x",
        "example.com:443",
        "10.0.0.0/33",
    ],
)
def test_bad_allow_entries_are_refused_with_the_forms(entry: str) -> None:
    with pytest.raises(ValueError, match="forms:"):
        parse_allowed(entry)
    with pytest.raises(ValidationError, match="forms:"):
        KadenceSettings.model_validate({"target_allow_cidrs": [entry]})
