"""The webhook target's kept-alive connections (connectors/http_pool.py): reused for the same
tenant and checked address only, never past the address policy, never once a stop has touched
them."""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from connectors.http import HttpCaller
from connectors.http_dns import Resolver
from connectors.ssrf import AddressPolicy
from kadence.models import OutcomeStatus
from kadence.target_allow import IPAddress
from kadence.targets import Stop
from testkit.target_server import TargetServer
from tests.connectors.test_http import call, caller, err, execution


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.stop()


def idle(c: HttpCaller) -> list[socket.socket]:
    return [
        conn.transport.get_extra_info("socket")
        for conns in c.pool._idle.values()
        for conn, _ in conns
        if conn.transport is not None
    ]


def test_runs_to_one_place_share_one_connection(server: TargetServer) -> None:
    c = caller()
    for _ in range(5):
        assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert len(server.seen("/ok")) == 5
    assert (server.connections, c.pool.opened) == (1, 1)


def test_a_failure_status_keeps_the_connection_too(server: TargetServer) -> None:
    c = caller()
    assert call(c, execution(f"{server.url}/fail")).status is OutcomeStatus.failed
    assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert server.connections == 1


def test_a_server_that_closes_after_each_answer_gets_a_new_connection_each_time() -> None:
    srv = TargetServer(keep_alive=False).start()
    try:
        c = caller()
        for _ in range(3):
            assert call(c, execution(f"{srv.url}/ok")).status is OutcomeStatus.succeeded
        assert (srv.connections, c.pool.opened) == (3, 3)
        assert idle(c) == []
    finally:
        srv.stop()


def test_the_policy_is_checked_on_every_run_even_with_a_connection_kept(
    server: TargetServer,
) -> None:
    c = caller()
    assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert len(idle(c)) == 1
    c.resolver.policy = AddressPolicy([])  # loopback no longer allowed
    result = call(c, execution(f"{server.url}/ok"))
    assert err(result).type == "AddressRefused"
    assert len(server.seen("/ok")) == 1


def test_a_name_that_now_resolves_elsewhere_does_not_reuse_the_old_address_s_connection(
    server: TargetServer,
) -> None:
    answers = {"target.test": ipaddress.ip_address("127.0.0.1")}

    async def lookup(host: str) -> list[tuple[IPAddress, float]]:
        return [(answers[host], 0.0)]

    now = [0.0]
    c = caller()
    c.resolver = Resolver(c.resolver.policy, lookup, clock=lambda: now[0])
    url = server.url.replace("127.0.0.1", "target.test")
    assert call(c, execution(f"{url}/ok")).status is OutcomeStatus.succeeded
    answers["target.test"] = ipaddress.ip_address("127.0.0.2")  # allowed; nothing listens there
    now[0] += 60  # past the answer's TTL
    result = call(c, execution(f"{url}/ok"))
    assert err(result).type == "ConnectError"  # it went to the address the new answer gave
    assert "127.0.0.1" not in err(result).message and len(server.seen("/ok")) == 1
    assert c.pool.opened == 2


def test_a_kept_connection_the_server_closed_is_replaced_and_the_request_sent_once(
    server: TargetServer,
) -> None:
    c = caller()
    assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    [sock] = idle(c)
    with socket.socket(fileno=os.dup(sock.fileno())) as same:  # the loop's is a stand-in
        same.shutdown(socket.SHUT_RDWR)  # as if the server had dropped it while idle
    assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert len(server.seen("/ok")) == 2
    assert c.pool.opened == 2


def test_a_stop_after_the_run_leaves_the_kept_connection_alone(server: TargetServer) -> None:
    c = caller()
    stop = Stop()
    assert call(c, execution(f"{server.url}/ok"), stop).status is OutcomeStatus.succeeded
    stop.set(OutcomeStatus.lease_lost)  # e.g. the lease ran out before the outcome committed
    assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert (server.connections, c.pool.opened) == (1, 1)


def test_a_stopped_request_s_connection_is_not_kept(server: TargetServer) -> None:
    c = caller()
    stop = Stop()
    ex = execution(f"{server.url}/slow?s=30", timeout_ms=60_000)
    threading.Timer(0.3, lambda: stop.set(OutcomeStatus.cancelled)).start()
    assert call(c, ex, stop).status is OutcomeStatus.cancelled
    assert idle(c) == []
    started = time.monotonic()
    assert call(c, execution(f"{server.url}/ok")).status is OutcomeStatus.succeeded
    assert time.monotonic() - started < 5
    assert c.pool.opened == 2
