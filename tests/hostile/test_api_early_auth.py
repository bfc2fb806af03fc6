"""Issue 28, item 7: an outsider without a token must not make the API hold request bodies.

Every route that takes a body needs a token, so a request with a body and no known token is
answered 401 before any of its body is read; and the server holds at most
KADENCE_API_MAX_CONNECTIONS connections, answering 503 past them. Issue 41, item 4: of those,
connections that have shown no token are bounded apart (the oldest closed past the bound, never
one with a token), each request head must be whole within its timeout however it trickles, and
a known caller's body within its own (tests/hostile/test_api_slow_clients.py runs the lockout
against `python -m apps.api`)."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn
from pydantic import ValidationError

from apps.api.__main__ import server_config
from apps.api.auth import token_hash
from kadence.settings import KadenceSettings

Serve = Callable[[KadenceSettings], int]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Serve the API as `python -m apps.api` configures it (no broker: no lifespan) on a port
    the system picks; returns the port."""
    servers: list[tuple[uvicorn.Server, threading.Thread, socket.socket]] = []

    def start(settings: KadenceSettings) -> int:
        config = server_config(settings)
        config.lifespan = "off"
        sock = socket.create_server(("127.0.0.1", 0))
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        servers.append((server, thread, sock))
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        return int(sock.getsockname()[1])

    yield start
    for server, thread, sock in servers:
        server.should_exit = True
        thread.join(10)
        sock.close()


def settings(**more: object) -> KadenceSettings:
    return KadenceSettings.model_validate({"api_tokens": {token_hash("tok-acme"): "acme"}, **more})


def answer_head(conn: socket.socket) -> bytes:
    answer = b""
    while b"\r\n\r\n" not in answer:
        data = conn.recv(65536)  # a server waiting for the rest of the body never answers
        assert data, f"connection closed without an answer: {answer!r}"
        answer += data
    return answer


@pytest.mark.parametrize("authorization", [b"", b"Authorization: Bearer not-a-token\r\n"])
def test_a_large_body_without_a_known_token_is_refused_unread(
    serve: Serve, authorization: bytes
) -> None:
    port = serve(settings())
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(
            b"POST /v1/jobs/flood HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            + authorization
            + b'Content-Length: 500000\r\n\r\n{"sche'  # within the limit; the rest never comes
        )
        started = time.monotonic()
        head = answer_head(conn)
        assert time.monotonic() - started < 3
    assert head.startswith(b"HTTP/1.1 401 ")
    assert b"www-authenticate: bearer" in head.lower()


def test_a_known_callers_body_is_still_read(serve: Serve) -> None:
    port = serve(settings())
    body = b"not json"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(
            b"POST /v1/jobs/ok/backfill HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer tok-acme\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        assert answer_head(conn).startswith(b"HTTP/1.1 422 ")  # read and parsed: not JSON


def test_requests_without_a_body_need_no_token_here(serve: Serve) -> None:
    port = serve(settings())
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
        assert answer_head(conn).startswith(b"HTTP/1.1 200 ")


def authenticated(conn: socket.socket) -> bytes:
    """A request with acme's token on `conn`, kept open: the answer's head, its body read."""
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer tok-acme\r\n\r\n")
    answer = answer_head(conn)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = re.search(rb"\r\ncontent-length: (\d+)", head.lower())
    assert length, head
    while len(body) < int(length.group(1)):
        body += conn.recv(65536)
    return head


def is_closed(conn: socket.socket, within_s: float) -> bool:
    """Whether the server closes `conn` within `within_s` (reading past any answer)."""
    conn.settimeout(within_s)
    try:
        while conn.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_connections_past_the_limit_are_answered_503(serve: Serve) -> None:
    assert server_config(settings()).limit_concurrency == 256  # the default
    port = serve(settings(api_max_connections=3))  # uvicorn counts the asking one in
    held: list[socket.socket] = []
    try:
        for _ in range(2):  # callers with a token, their connections kept open
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            assert authenticated(held[-1]).startswith(b"HTTP/1.1 200 ")
        held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        held[-1].sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
        assert answer_head(held[-1]).startswith(b"HTTP/1.1 503 ")
    finally:
        for conn in held:
            conn.close()


def test_a_head_trickled_a_byte_at_a_time_is_cut_at_the_head_timeout(serve: Serve) -> None:
    """Each byte resets no timer: the head must be whole within the timeout (uvicorn's
    keep-alive timeout stops at the first byte)."""
    port = serve(settings(api_head_timeout_s=1.0))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        started = time.monotonic()
        conn.sendall(b"GET /healthz HTTP/1.1\r\n")
        closed = False
        while not closed and time.monotonic() - started < 4:
            conn.sendall(b"x")  # x-x-x-x...: a header that never ends
            closed = is_closed(conn, 0.2)
        took = time.monotonic() - started
    assert closed and 0.8 < took < 3


def test_a_caller_with_a_token_is_never_evicted_and_idle_ones_oldest_first(serve: Serve) -> None:
    port = serve(settings(api_max_connections=8, api_max_unauthenticated=2))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as mine:
        assert authenticated(mine).startswith(b"HTTP/1.1 200 ")
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
        try:
            assert authenticated(mine).startswith(b"HTTP/1.1 200 ")  # still open, still served
            assert [is_closed(c, 0.5) for c in idle] == [True, True, True, False, False]
        finally:
            for conn in idle:
                conn.close()


def test_a_body_that_does_not_arrive_in_time_is_answered_408(serve: Serve) -> None:
    port = serve(settings(api_body_timeout_s=1.0))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(
            b"POST /v1/jobs/slow/backfill HTTP/1.1\r\nHost: api\r\nContent-Type: "
            b"application/json\r\nAuthorization: Bearer tok-acme\r\nContent-Length: 100\r\n"
            b'\r\n{"start'  # a known caller's body, 93 bytes of it never sent
        )
        started = time.monotonic()
        head = answer_head(conn)
        took = time.monotonic() - started
        assert head.startswith(b"HTTP/1.1 408 ") and 0.8 < took < 3
        assert is_closed(conn, 2)


def test_the_bound_on_connections_without_a_token_is_below_the_total() -> None:
    config = server_config(settings())
    assert config.limit_concurrency == 256
    assert config.ws == "none"  # a WebSocket upgrade would take its connection from the guard
    with pytest.raises(ValidationError, match="api_max_unauthenticated"):
        settings(api_max_connections=8, api_max_unauthenticated=8)
    with pytest.raises(ValidationError, match="api_max_connections"):
        settings(api_max_connections=1)  # no room for one without a token beside it
