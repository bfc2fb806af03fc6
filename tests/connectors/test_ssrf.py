"""Which addresses HTTP targets may reach."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from connectors.ssrf import AddressPolicy, AddressRefused
from kadence.settings import KadenceSettings
from kadence.target_allow import AllowedNetwork, parse_allowed


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "metadata"),
        ("169.254.10.10", "link-local"),
        ("100.100.100.200", "metadata"),
        ("100.64.0.1", "shared"),
        ("0.0.0.0", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:10.0.0.1", "private"),  # IPv4-mapped IPv6 is the IPv4 address
        ("224.0.0.1", "multicast"),
        ("2002:a00:1::1", "6to4"),  # 6to4 relay to 10.0.0.1
        ("2002:a9fe:a9fe::1", "6to4"),  # ... to 169.254.169.254
        ("2002:808:808::1", "6to4"),  # refused whole, even to a public IPv4
        ("fec0::1", "site-local"),
        ("feff:ffff::1", "site-local"),
    ],
)
def test_private_and_metadata_addresses_are_refused(address: str, kind: str) -> None:
    why = AddressPolicy().why_refused(ipaddress.ip_address(address))
    assert why is not None
    assert kind in why


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert AddressPolicy().why_refused(ipaddress.ip_address(address)) is None


def test_the_deployment_can_allow_a_network() -> None:
    policy = AddressPolicy(["10.20.0.0/16", "127.0.0.1/32"])
    assert policy.why_refused(ipaddress.ip_address("10.20.5.5")) is None
    assert policy.why_refused(ipaddress.ip_address("127.0.0.1")) is None
    assert policy.why_refused(ipaddress.ip_address("10.21.0.1")) is not None
    assert policy.why_refused(ipaddress.ip_address("169.254.169.254")) is not None


def test_a_name_is_checked_on_what_it_resolves_to() -> None:
    with pytest.raises(AddressRefused, match=r"localhost resolves to .*loopback.*ALLOW_CIDRS"):
        AddressPolicy().resolve("localhost", 80)
    assert str(AddressPolicy(["127.0.0.0/8", "::1/128"]).resolve("localhost", 80)) in (
        "127.0.0.1",
        "::1",
    )


def test_an_unresolvable_name_is_an_os_error_not_a_refusal() -> None:
    with pytest.raises(OSError, match="cannot resolve"):
        AddressPolicy().resolve("no-such-host.invalid", 80)


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
    with pytest.raises(AddressRefused, match=r"on port 8080 unless"):
        AddressPolicy(["127.0.0.0/8:8443"]).resolve("127.0.0.1", 8080)
    assert str(AddressPolicy(["127.0.0.0/8:8443"]).resolve("127.0.0.1", 8443)) == "127.0.0.1"


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
