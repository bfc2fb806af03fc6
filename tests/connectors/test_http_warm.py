"""Connections opened ahead of the HTTP runs due soon (connectors/http_warm.py): as many as the
busiest second due within the lead, only to an address the run's own policy check allows, none
for runs far off, and used by the runs when they come."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from connectors.aio import EventLoop
from connectors.http import HttpCaller
from connectors.http_dns import Resolver
from connectors.http_pool import ConnectionPool
from connectors.http_warm import SECONDS_TRACKED, Warmer
from connectors.ssrf import AddressPolicy
from kadence.models import OutcomeStatus, RateLimit
from testkit.target_server import TargetServer
from tests.connectors.test_http import call, caller, execution


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.stop()


def due_in(c: HttpCaller, url: str, seconds: float, n: int = 1) -> list[datetime]:
    """`n` executions to `url` due `seconds` from now, prepared as the worker does on reading."""
    due = datetime.fromtimestamp(time.time() + seconds, UTC)
    for _ in range(n):
        c.prepare(execution(url).model_copy(update={"due_at": due}))
    return [due] * n


def until(check: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.02)
    raise AssertionError("not reached in time")


def test_runs_due_soon_find_their_connections_open_and_use_them(server: TargetServer) -> None:
    c = caller()
    due_in(c, f"{server.url}/ok", 1.0, n=5)
    until(lambda: server.connections == 5)
    assert (c.warmer.warmed, c.pool.opened) == (5, 5)
    for _ in range(5):
        assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert (server.connections, c.pool.opened) == (5, 5)  # nothing new opened for the runs


def test_the_busiest_second_sets_the_count_not_the_sum(server: TargetServer) -> None:
    c = caller()
    due_in(c, f"{server.url}/ok", 0.6, n=3)
    due_in(c, f"{server.url}/ok", 1.6, n=2)
    until(lambda: server.connections == 3)
    time.sleep(0.5)
    assert server.connections == 3


def test_tenants_sharing_a_receiver_each_get_their_own(server: TargetServer) -> None:
    """A connection serves only the runs of the tenant it was opened for
    (connectors/http_pool.py): three tenants with two runs each due at one receiver want six."""
    c = caller()
    due = datetime.fromtimestamp(time.time() + 1.0, UTC)
    for tenant in ("acme", "beta", "gamma"):
        for _ in range(2):
            c.prepare(
                execution(f"{server.url}/ok").model_copy(update={"due_at": due, "tenant": tenant})
            )
    until(lambda: server.connections == 6)
    time.sleep(0.3)
    assert c.warmer.warmed == 6
    for _ in range(2):
        assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert server.connections == 6  # acme's runs took acme's own


def test_runs_far_off_open_nothing_yet(server: TargetServer) -> None:
    c = caller()
    due_in(c, f"{server.url}/ok", 30.0, n=4)
    time.sleep(0.5)
    assert (server.connections, c.warmer.warmed) == (0, 0)


def test_an_address_the_tenant_may_not_reach_is_never_connected(server: TargetServer) -> None:
    c = caller(allow=[])  # loopback is not public: refused for this tenant
    due_in(c, f"{server.url}/ok", 0.5, n=3)
    time.sleep(0.6)
    assert (server.connections, c.warmer.warmed) == (0, 0)
    result = call(c, execution(f"{server.url}/ok"))
    assert (result.status, result.error and result.error.type) == (
        OutcomeStatus.failed,
        "AddressRefused",
    )


def test_another_tenant_s_allow_list_does_not_open_a_connection_for_this_one(
    server: TargetServer,
) -> None:
    policy = AddressPolicy([], {"other": ["127.0.0.0/8"]})
    c = HttpCaller(policy, {})
    due_in(c, f"{server.url}/ok", 0.5, n=2)  # the executions are of tenant "acme"
    time.sleep(0.6)
    assert server.connections == 0


def test_the_count_is_capped() -> None:
    srv = TargetServer(keep_alive=True).start()
    loop = EventLoop("test-warm")
    try:
        pool = ConnectionPool(caller().tls)
        warmer = Warmer(pool, Resolver(AddressPolicy(["127.0.0.0/8"])), loop, lead_s=1.0, cap=3)
        for _ in range(10):
            warmer.expect(f"{srv.url}/ok", "acme", time.time() + 0.5)
        until(lambda: srv.connections == 3)
        time.sleep(0.3)
        assert (srv.connections, warmer.warmed) == (3, 3)
    finally:
        loop.close()
        srv.stop()


def test_nothing_listening_is_left_alone_after_one_try() -> None:
    with socket.socket() as bound:  # bound, not listening: a connect is refused
        bound.bind(("127.0.0.1", 0))
        c = caller()
        due_in(c, f"http://127.0.0.1:{bound.getsockname()[1]}/ok", 1.0, n=20)
        time.sleep(0.6)
        assert (c.pool.opened, c.warmer.warmed) == (1, 0)  # one refused connect, then rests


def test_urls_it_cannot_use_and_a_flood_of_seconds_are_ignored() -> None:
    loop = EventLoop("test-warm-bad")
    try:
        warmer = Warmer(ConnectionPool(caller().tls), Resolver(AddressPolicy()), loop)
        for url in ("http://[::1", "ftp://x/", "http://:80/", "http://h:99999/", "\x00"):
            warmer.expect(url, "acme", time.time() + 1)
        now = time.time()
        for i in range(SECONDS_TRACKED + 50):
            warmer.expect("http://example.invalid/", "acme", now + 20 + i)
        wanted = warmer.wanted(time.time())
        assert wanted == {}  # counted (far off), not wanted yet, and no more than the bound
        assert sum(len(s) for s in warmer._due.values()) == SECONDS_TRACKED
    finally:
        loop.close()


def test_seconds_past_are_forgotten_and_the_ticks_stop() -> None:
    loop = EventLoop("test-warm-past")
    try:
        warmer = Warmer(ConnectionPool(caller().tls), Resolver(AddressPolicy()), loop)
        warmer.expect("http://example.invalid/", "acme", time.time() - 5)
        assert warmer.wanted(time.time()) is None
        assert warmer._due == {}
    finally:
        loop.close()


def test_a_lead_past_the_pool_s_idle_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="idle limit"):
        Warmer(ConnectionPool(caller().tls), Resolver(AddressPolicy()), EventLoop("x"), lead_s=10)


def test_a_rate_limited_destination_is_not_warmed_for_its_whole_burst(
    server: TargetServer,
) -> None:
    """10 000 runs due at once against a limit of 100/s are spread over 100 s: warming for
    all of them opened a connection per run (thousands) and stalled the receiver."""
    c = caller()
    due = datetime.fromtimestamp(time.time() + 0.5, UTC)
    limited = execution(f"{server.url}/ok").model_copy(update={"due_at": due})
    target = limited.target.model_copy(update={"rate_limit": RateLimit(per_second=100)})
    for _ in range(50):
        c.prepare(limited.model_copy(update={"target": target}))
    time.sleep(1.0)
    assert (server.connections, c.warmer.warmed) == (0, 0)
