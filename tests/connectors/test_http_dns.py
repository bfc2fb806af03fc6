"""The targets' resolver (connectors/http_dns.py): answers kept for their TTL between a floor and
a ceiling, failures kept for the floor, one lookup for many runs, no tenant's slow names in
another tenant's way, every address checked and tried, and the lookup under the run's deadline."""

from __future__ import annotations

import asyncio
import ipaddress
import time

import pytest
from pydantic import SecretStr

from connectors import http_dns
from connectors.http import HttpCaller
from connectors.http_dns import CaresLookup, Resolver
from connectors.ssrf import AddressPolicy, AddressRefused
from kadence.models import OutcomeStatus
from kadence.target_allow import IPAddress
from kadence.targets import Stop
from testkit.target_server import TargetServer
from tests.connectors.test_http import execution

LOOPBACK = ipaddress.ip_address("127.0.0.1")


class FakeDns:
    """Answers from a table, counting lookups; a name in `held` is answered only when its
    event is set (a slow resolver)."""

    def __init__(self, table: dict[str, list[tuple[str, float]]]) -> None:
        self.table = table
        self.asked: list[str] = []
        self.held: dict[str, asyncio.Event] = {}

    async def __call__(self, host: str) -> list[tuple[IPAddress, float]]:
        self.asked.append(host)
        if host in self.held:
            await self.held[host].wait()
        if host not in self.table:
            raise OSError(f"cannot resolve {host}: Domain name not found")
        return [(ipaddress.ip_address(a), ttl) for a, ttl in self.table[host]]


def resolver(dns: FakeDns, now: list[float], **kw: int) -> Resolver:
    policy = AddressPolicy(["127.0.0.0/8", "192.0.2.0/24"])
    return Resolver(policy, dns, clock=lambda: now[0], **kw)


def test_an_answer_is_kept_for_its_ttl_held_between_the_floor_and_the_ceiling() -> None:
    dns = FakeDns({"zero.test": [("127.0.0.1", 0)], "day.test": [("127.0.0.2", 86_400)]})
    now = [0.0]
    r = resolver(dns, now)

    async def ask() -> None:
        for host in ("zero.test", "day.test"):
            await r.addresses(host, 80, "acme")

    asyncio.run(ask())
    now[0] = http_dns.TTL_MIN_S - 0.1
    asyncio.run(ask())
    assert dns.asked == ["zero.test", "day.test"]  # both kept: TTL 0 held up to the floor
    now[0] = http_dns.TTL_MIN_S + 0.1
    asyncio.run(ask())
    assert dns.asked == ["zero.test", "day.test", "zero.test"]
    now[0] = http_dns.TTL_MAX_S + 0.1
    asyncio.run(ask())
    assert dns.asked.count("day.test") == 2  # a day-long TTL held down to the ceiling


def test_a_failed_lookup_is_kept_for_the_floor_then_asked_again() -> None:
    dns = FakeDns({})
    now = [0.0]
    r = resolver(dns, now)
    for at in (0.0, 1.0, http_dns.TTL_MIN_S + 0.1):
        now[0] = at
        with pytest.raises(OSError, match=r"cannot resolve gone\.test"):
            asyncio.run(r.addresses("gone.test", 80, "acme"))
    assert dns.asked == ["gone.test", "gone.test"]


def test_many_runs_resolving_one_name_at_once_make_one_lookup() -> None:
    dns = FakeDns({"busy.test": [("127.0.0.1", 30)]})
    r = resolver(dns, [0.0])

    async def burst() -> list[tuple[IPAddress, ...]]:
        dns.held["busy.test"] = asyncio.Event()
        waiting = [asyncio.ensure_future(r.addresses("busy.test", 80, "acme")) for _ in range(200)]
        await asyncio.sleep(0.05)
        dns.held["busy.test"].set()
        return await asyncio.gather(*waiting)

    answers = asyncio.run(burst())
    assert dns.asked == ["busy.test"]
    assert set(answers) == {(LOOPBACK,)}


def test_a_tenant_s_slow_names_are_not_in_another_tenant_s_way() -> None:
    """Tenant acme asks for 100 names that take forever; globex's name answers at once, and
    acme never has more than `per_tenant` lookups under way."""
    slow = {f"slow{i}.test": [("127.0.0.1", 30.0)] for i in range(100)}
    dns = FakeDns({**slow, "fast.test": [("127.0.0.2", 30.0)]})
    r = resolver(dns, [0.0], per_tenant=4)

    async def scene() -> tuple[float, int]:
        for name in slow:
            dns.held[name] = asyncio.Event()
        acme = [asyncio.ensure_future(r.addresses(name, 80, "acme")) for name in slow]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await asyncio.wait_for(r.addresses("fast.test", 80, "globex"), timeout=1)
        took = time.monotonic() - started
        under_way = len(dns.asked) - 1
        for event in dns.held.values():
            event.set()
        await asyncio.gather(*acme)
        return took, under_way

    took, under_way = asyncio.run(scene())
    assert took < 0.5
    assert under_way == 4


def test_a_name_with_any_address_the_tenant_may_not_reach_is_refused_whole() -> None:
    dns = FakeDns({"mixed.test": [("127.0.0.1", 30), ("10.1.2.3", 30)]})
    with pytest.raises(AddressRefused, match=r"mixed.test resolves to 10.1.2.3, a private"):
        asyncio.run(resolver(dns, [0.0]).addresses("mixed.test", 80, "acme"))


def test_an_address_is_checked_without_a_lookup() -> None:
    dns = FakeDns({})
    r = resolver(dns, [0.0])
    assert asyncio.run(r.addresses("127.0.0.1", 80, "acme")) == (LOOPBACK,)
    with pytest.raises(AddressRefused):
        asyncio.run(r.addresses("169.254.169.254", 80, "acme"))
    assert dns.asked == []


def test_the_names_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_dns, "NAMES_KEPT", 10)
    dns = FakeDns({f"n{i}.test": [("127.0.0.1", 300)] for i in range(25)})
    r = resolver(dns, [0.0])

    async def ask_all() -> None:
        for i in range(25):
            await r.addresses(f"n{i}.test", 80, "acme")

    asyncio.run(ask_all())
    assert len(r._kept) <= 10


def test_real_lookups_go_through_c_ares_with_the_hosts_file() -> None:
    lookup = CaresLookup()
    found = asyncio.run(lookup("localhost"))
    assert {str(a) for a, _ in found} <= {"127.0.0.1", "::1"}
    assert LOOPBACK in {a for a, _ in found}
    with pytest.raises(OSError, match=r"cannot resolve no-such-host\.invalid"):
        asyncio.run(lookup("no-such-host.invalid"))


def caller_with(dns: FakeDns) -> HttpCaller:
    policy = AddressPolicy(["127.0.0.0/8"])
    c = HttpCaller(policy, {"*": {"test": SecretStr("s")}}, warm_s=0)
    c.resolver = Resolver(policy, dns)
    return c


def test_every_address_is_tried_until_one_takes_the_connection() -> None:
    srv = TargetServer(keep_alive=True).start()
    try:
        dns = FakeDns({"two.test": [("127.0.0.2", 30), ("127.0.0.1", 30)]})  # .2: nobody there
        c = caller_with(dns)
        url = srv.url.replace("127.0.0.1", "two.test")
        result = c.start(execution(f"{url}/ok"), Stop()).result(timeout=30)
        assert result.status is OutcomeStatus.succeeded
        [key] = c.pool._idle
        assert str(key[3]) == "127.0.0.1"
    finally:
        srv.stop()


def test_a_lookup_is_under_the_run_s_deadline_and_holds_up_no_other_tenant() -> None:
    """The issue's find: one tenant's slow-resolving host made another tenant's 1 s webhook time
    out after 2.8 s. Now the slow one times out at its own deadline and the other is sent at
    once."""
    srv = TargetServer(keep_alive=True).start()
    try:
        dns = FakeDns({"slow.test": [("127.0.0.1", 30)], "fast.test": [("127.0.0.1", 30)]})
        c = caller_with(dns)
        dns.held["slow.test"] = asyncio.Event()  # never set: the lookup never answers
        slow_url = srv.url.replace("127.0.0.1", "slow.test")
        fast_url = srv.url.replace("127.0.0.1", "fast.test")
        slow = [c.start(execution(f"{slow_url}/ok", timeout_ms=1_000), Stop()) for _ in range(64)]
        other = execution(f"{fast_url}/ok", timeout_ms=1_000).model_copy(
            update={"tenant": "globex"}
        )
        started = time.monotonic()
        assert c.start(other, Stop()).result(timeout=30).status is OutcomeStatus.succeeded
        assert time.monotonic() - started < 0.9
        for future in slow:
            result = future.result(timeout=30)
            assert result.status is OutcomeStatus.timed_out
        assert time.monotonic() - started < 2.0  # 1 s each, all at once
    finally:
        srv.stop()
