"""The webhook target's path without a thread (`start`, connectors/http_exchange.py): the same
rules as the blocking call (which waits for the same coroutine), answers framed by h11, and a
stop that aborts the request at once."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from connectors.http import HttpCaller
from connectors.http_dns import Resolver
from kadence.models import OutcomeStatus
from kadence.target_allow import IPAddress
from kadence.targets import Result, Stop
from testkit.target_server import TargetServer
from tests.connectors.test_http import caller, err, execution


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.stop()


def started(
    c: HttpCaller, url: str, stop: Stop | None = None, timeout_ms: int = 5_000
) -> Future[Result]:
    future = c.start(execution(url, timeout_ms), stop or Stop(), None)
    assert isinstance(future, Future)
    return future


def test_start_returns_at_once_and_the_loop_holds_many_requests(server: TargetServer) -> None:
    c = caller()
    assert c.can_start(execution(f"{server.url}/ok"))
    futures = [started(c, f"{server.url}/slow?s=1") for _ in range(100)]
    assert not any(f.done() for f in futures)  # nobody waited for an answer
    results = [f.result(timeout=60) for f in futures]
    assert {r.status for r in results} == {OutcomeStatus.succeeded}
    hits = server.seen("/slow")
    assert len(hits) == 100
    assert max(h.at for h in hits) < min(h.done for h in hits)  # all 100 held at once


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/", "http://10.0.0.1/", "http://169.254.169.254/", "http://localhost:9/"],
)
def test_private_and_metadata_addresses_are_refused_on_the_async_path(url: str) -> None:
    result = started(caller(allow=[]), url).result(timeout=30)
    assert result.status is OutcomeStatus.failed and not result.retryable
    assert err(result).type == "AddressRefused"


def test_a_name_is_looked_up_once_for_many_runs_and_the_request_goes_to_the_address_checked(
    server: TargetServer,
) -> None:
    """A name is resolved by the resolver (cached for its TTL), checked by the policy, and the
    connection goes to that very address: no second lookup to rebind."""
    looked_up: list[str] = []

    async def lookup(host: str) -> list[tuple[IPAddress, float]]:
        looked_up.append(host)
        return [(ipaddress.ip_address("127.0.0.1"), 30.0)]

    c = caller()
    c.resolver = Resolver(c.resolver.policy, lookup)
    url = server.url.replace("127.0.0.1", "receiver.test")
    for _ in range(5):
        assert started(c, f"{url}/ok").result(timeout=30).status is OutcomeStatus.succeeded
    assert looked_up == ["receiver.test"]
    [key] = c.pool._idle
    assert (key[1], str(key[3]), key[4]) == ("receiver.test", "127.0.0.1", "acme")
    hosts = {v for h in server.seen("/ok") for k, v in h.headers.items() if k.lower() == "host"}
    assert hosts == {url.removeprefix("http://")}


@pytest.mark.parametrize("reason", [OutcomeStatus.cancelled, OutcomeStatus.lease_lost])
def test_a_stop_aborts_the_async_request_at_once(
    server: TargetServer, reason: OutcomeStatus
) -> None:
    c, stop = caller(), Stop()
    future = started(c, f"{server.url}/hang", stop, timeout_ms=600_000)
    server.wait(1, "/hang", timeout_s=30)
    assert not future.done()
    stop.set(reason)
    assert future.result(timeout=10).status is reason  # /hang never answers
    assert not any(c.pool._idle.values())  # its connection was not kept


def test_the_deadline_times_the_async_request_out(server: TargetServer) -> None:
    result = started(caller(), f"{server.url}/hang", timeout_ms=500).result(timeout=30)
    assert result.status is OutcomeStatus.timed_out
    assert err(result).message.endswith("did not answer within 500 ms")


def test_a_stop_set_before_the_start_sends_nothing(server: TargetServer) -> None:
    stop = Stop()
    stop.set(OutcomeStatus.cancelled)
    assert started(caller(), f"{server.url}/ok", stop).result(timeout=10).status is (
        OutcomeStatus.cancelled
    )
    time.sleep(0.2)
    assert server.seen() == []


class Canned:
    """A loopback server that reads each request and answers with the bytes it was given,
    then closes the connection or keeps it (counting connections)."""

    def __init__(self, answer: bytes, *, close: bool = False) -> None:
        self.answer, self.close = answer, close
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections = 0
        self.requests: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # the caller may go away mid-answer
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(buf) < length:
                    buf += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buf[:length])
                buf = buf[length:]
                conn.sendall(self.answer)
                if self.close:
                    return


def twice(answer: bytes, close: bool = False) -> tuple[list[Result], Canned]:
    srv = Canned(answer, close=close)
    c = caller()
    results = [started(c, f"{srv.url}/x").result(timeout=30) for _ in range(2)]
    return results, srv


def test_a_chunked_answer_is_read_and_its_connection_kept() -> None:
    body = b"4\r\nfail\r\n6\r\ned: no\r\n0\r\n\r\n"
    results, srv = twice(b"HTTP/1.1 500 Oops\r\ntransfer-encoding: chunked\r\n\r\n" + body)
    assert [err(r).message for r in results] == [f"500 Oops from {srv.url}/x: failed: no"] * 2
    assert srv.connections == 1


def test_an_interim_100_continue_is_skipped() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
    results, srv = twice(answer)
    assert {r.status for r in results} == {OutcomeStatus.succeeded}
    assert srv.connections == 1


def test_a_body_that_ends_with_the_connection_is_read_and_not_reused() -> None:
    results, srv = twice(b"HTTP/1.1 503 Busy\r\n\r\ntry later", close=True)
    assert [err(r).message for r in results] == [f"503 Busy from {srv.url}/x: try later"] * 2
    assert all(r.retryable for r in results)
    assert srv.connections == 2


def test_a_long_body_is_cut_and_its_connection_closed_not_drained() -> None:
    big = b"x" * 200_000
    answer = b"HTTP/1.1 400 Bad\r\ncontent-length: %d\r\n\r\n" % len(big) + big
    results, srv = twice(answer)
    assert all(err(r).message.endswith("x" * 1_000) for r in results)  # cut at 4 096
    assert [len(err(r).message) for r in results] == [4096] * 2
    assert not any(r.retryable for r in results)
    assert srv.connections == 2


def test_a_redirect_is_not_followed_and_names_its_location() -> None:
    answer = b"HTTP/1.1 302 Found\r\nLocation: http://10.0.0.1/\r\ncontent-length: 0\r\n\r\n"
    results, srv = twice(answer)
    assert "redirect to http://10.0.0.1/ not followed" in err(results[0]).message
    assert len(srv.requests) == 2


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (b"SMTP ready\r\n\r\n", "BadResponse"),
        (b"HTTP/1.1 200 OK\r\n" + b"x-big: " + b"y" * 200_000 + b"\r\n\r\n", "BadResponse"),
        (b"", "RemoteDisconnected"),
    ],
)
def test_a_broken_answer_is_a_retryable_failure_that_says_what_broke(
    answer: bytes, kind: str
) -> None:
    srv = Canned(answer, close=True)
    result = started(caller(), f"{srv.url}/x").result(timeout=30)
    assert result.status is OutcomeStatus.failed and result.retryable
    assert err(result).type == kind


def test_the_head_decides_a_2xx_cut_short_still_succeeded() -> None:
    """The receiver said 200 and went away in the middle of the body: it got the run and took
    it (the conformance corpus has the other framings: tests/connectors/
    test_receiver_conformance.py)."""
    srv = Canned(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", close=True)
    assert started(caller(), f"{srv.url}/x").result(timeout=30).status is OutcomeStatus.succeeded
    assert len(srv.requests) == 1


def test_the_request_is_framed_as_http_client_framed_it(server: TargetServer) -> None:
    srv = Canned(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
    assert started(caller(), f"{srv.url}/p?q=1").result(timeout=30).status is (
        OutcomeStatus.succeeded
    )
    [request] = srv.requests
    head, _, body = request.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /p?q=1 HTTP/1.1"
    port = srv.url.rsplit(":", 1)[1]
    assert f"Host: 127.0.0.1:{port}".encode() in lines
    assert b"Content-Length: 7" in lines and body == b'{"a":1}'
    assert b"idempotency-key: acme/job@2026-12-01T09:00:00.000Z" in lines
