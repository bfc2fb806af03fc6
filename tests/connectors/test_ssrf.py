"""Which addresses HTTP targets may reach."""

from __future__ import annotations

import ipaddress

import pytest

from connectors.ssrf import AddressPolicy, AddressRefused


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
