"""Issue 28, item 7: an outsider without a token must not make the API hold request bodies.

Every route that takes a body needs a token, so a request with a body and no known token is
answered 401 before any of its body is read; and the server holds at most
KADENCE_API_MAX_CONNECTIONS connections, answering 503 past them."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn

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


def test_connections_past_the_limit_are_answered_503(serve: Serve) -> None:
    assert server_config(settings()).limit_concurrency == 256  # the default
    port = serve(settings(api_max_connections=2))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as first,
        socket.create_connection(("127.0.0.1", port), timeout=5) as second,
    ):
        first.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n")  # held open, headers unfinished
        time.sleep(0.2)
        second.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
        assert answer_head(second).startswith(b"HTTP/1.1 503 ")
