"""Where HTTP and SQS targets may connect: public addresses, plus networks the deployment
allows: for every tenant (KADENCE_TARGET_ALLOW_CIDRS) or for the targets of one tenant only
(KADENCE_TARGET_ALLOW_CIDRS_BY_TENANT).

Checked on the resolved address at send time (and the connection goes to exactly that
address), so a name that resolves to a private address, or re-resolves to one later, is refused.
A cloud metadata address is refused unless an entry names that very address (a /32 or /128):
a wider network (169.254.0.0/16, 0.0.0.0/0) never opens it. Azure's WireServer
(168.63.129.16) is one although its address is public. What is special-use is the policy's own
table from the IANA registries (connectors/special_addresses.py), never `ipaddress`'s
`is_private` and the like, whose verdict changes with the Python release; an address that
embeds an IPv4 address (IPv4-mapped, NAT64) is judged as the address it reaches.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from connectors.special_addresses import reached, special_use
from kadence.target_allow import AllowedNetwork, IPAddress, parse_allowed

METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure WireServer (public, yet the host's agent and its secrets)
        "fd20:ce::254",  # GCP (IPv6)
    )
)


VERDICTS_KEPT = 4_096
"""Addresses whose verdict is kept (the cache is emptied when full)."""


class AddressRefused(Exception):  # noqa: N818 - a verdict the target turns into an outcome
    pass


class AddressPolicy:
    def __init__(
        self, allow: Iterable[str] = (), by_tenant: Mapping[str, Iterable[str]] | None = None
    ) -> None:
        """`allow`: KADENCE_TARGET_ALLOW_CIDRS entries, a network with an optional port
        (kadence/target_allow.py), for every tenant's targets; `by_tenant`:
        KADENCE_TARGET_ALLOW_CIDRS_BY_TENANT, entries for the named tenant's targets only."""
        self.allow = tuple(parse_allowed(entry) for entry in allow)
        self.by_tenant = {
            tenant: tuple(parse_allowed(entry) for entry in entries)
            for tenant, entries in (by_tenant or {}).items()
        }
        self._verdicts: dict[tuple[IPAddress, int | None, str | None], str | None] = {}
        """`why_refused` of the addresses checked lately: the rules do not change, and a
        burst checks the same target's address thousands of times (every run still resolves
        its host: only the verdict on an address is kept)."""

    def why_refused(
        self, address: IPAddress, port: int | None = None, tenant: str | None = None
    ) -> str | None:
        """None when a target of `tenant` may reach `address` on `port`; else what kind of
        address it is. An allow-list entry with a port allows its network on that port only;
        a metadata address needs an entry naming exactly it."""
        key = (address, port, tenant)
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        verdict = self._why_refused(address, port, tenant)
        if len(self._verdicts) >= VERDICTS_KEPT:
            self._verdicts.clear()
        self._verdicts[key] = verdict
        return verdict

    def _why_refused(self, address: IPAddress, port: int | None, tenant: str | None) -> str | None:
        address = reached(address)
        entries = self.allow + (self.by_tenant.get(tenant, ()) if tenant is not None else ())
        if address in METADATA:
            if any(
                _names_exactly(entry, address) and entry.allows(address, port) for entry in entries
            ):
                return None
            return "a cloud metadata address"
        if any(entry.allows(address, port) for entry in entries):
            return None
        return special_use(address)

    def check_all(
        self, host: str, port: int, addresses: Iterable[IPAddress], tenant: str | None = None
    ) -> None:
        """Raise AddressRefused unless a target of `tenant` may reach every one of `addresses`
        (what `host` resolves to) on `port`."""
        for address in addresses:
            why = self.why_refused(address, port, tenant)
            if why is not None:
                unless = (
                    "an allow-list entry naming exactly this address (a /32 or /128)"
                    if why == "a cloud metadata address"
                    else "KADENCE_TARGET_ALLOW_CIDRS_BY_TENANT (for the job's tenant) or "
                    "KADENCE_TARGET_ALLOW_CIDRS allows it"
                )
                raise AddressRefused(
                    f"{host} resolves to {address}, {why}; targets may not reach it on port "
                    f"{port} unless {unless}"
                )


def _names_exactly(entry: AllowedNetwork, address: IPAddress) -> bool:
    """Whether `entry` is the single address `address` (a /32 or /128), not a network around it."""
    network = entry.network
    return network.prefixlen == network.max_prefixlen and network.network_address == address
