"""Issue 14, item 8: a caller streams a chunked body (no Content-Length) larger than the limit.
The API must answer 413 as soon as the limit is crossed, having held at most the limit, before
it parses anything. (Since issue 28, item 7, a caller without a known token is refused before
any of its body is read: tests/hostile/test_api_early_auth.py.)"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from apps.api.app import BODY_OVERHEAD, create_app
from apps.api.auth import token_hash
from kadence.settings import KadenceSettings

PAYLOAD_LIMIT = 1024
LIMIT = PAYLOAD_LIMIT + BODY_OVERHEAD
CHUNK = 4096


def settings() -> KadenceSettings:
    return KadenceSettings.model_validate(
        {"max_payload_bytes": PAYLOAD_LIMIT, "api_tokens": {token_hash("tok-acme"): "acme"}}
    )


def asgi_post(path: str, chunks: Iterator[bytes], headers: list[tuple[bytes, bytes]]) -> Any:
    """Drive the app as a server would, counting what it pulls from the client."""
    app = create_app(settings())
    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        pulled += len(chunk)
        assert pulled <= 20 * LIMIT, "the app kept reading far past the limit"
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    return pulled, sent


def endless() -> Iterator[bytes]:
    while True:
        yield b"x" * CHUNK


def test_an_endless_chunked_body_is_cut_at_the_limit() -> None:
    headers = [(b"transfer-encoding", b"chunked"), (b"authorization", b"Bearer tok-acme")]
    pulled, sent = asgi_post("/v1/jobs/flood", endless(), headers)
    assert sent[0]["status"] == 413
    assert pulled <= LIMIT + CHUNK  # read up to the limit, not one chunk more
    assert (b"connection", b"close") in sent[0]["headers"]


def test_a_body_within_the_limit_still_reaches_the_route() -> None:
    body = iter([b'{"schedule":', b" {}}"])
    headers = [(b"transfer-encoding", b"chunked"), (b"authorization", b"Bearer tok-acme")]
    _, sent = asgi_post("/v1/jobs/ok", body, headers)
    assert sent[0]["status"] == 422


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    _, sent = asgi_post("/v1/jobs/big", endless(), [(b"content-length", str(LIMIT + 1).encode())])
    assert sent[0]["status"] == 413


def test_a_body_within_the_limit_is_parsed_as_before() -> None:
    client = TestClient(create_app(settings()))
    r = client.post(
        "/v1/jobs/ok/backfill",
        content=b"not json" * 10,
        headers={"Authorization": "Bearer tok-acme"},
    )
    assert r.status_code == 422


@pytest.fixture
def server() -> Iterator[int]:
    """The API served by uvicorn on a port the system picks (no broker: no lifespan)."""
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(settings()), lifespan="off", log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        srv.should_exit = True
        thread.join(10)
        sock.close()


def test_over_real_http_the_413_comes_while_the_body_is_still_flowing(server: int) -> None:
    with socket.create_connection(("127.0.0.1", server), timeout=30) as conn:
        conn.sendall(
            b"POST /v1/jobs/flood HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer tok-acme\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        sent = 0
        while sent <= LIMIT:  # one byte past the limit, and the body never ends
            conn.sendall(b"%x\r\n%s\r\n" % (CHUNK, b"x" * CHUNK))
            sent += CHUNK
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = conn.recv(65536)  # a server that waits for the end of the body never answers
            assert data, f"connection closed without an answer: {answer!r}"
            answer += data
        assert answer.startswith(b"HTTP/1.1 413 ")
        while data := conn.recv(65536):  # and then it hangs up on the rest
            answer += data
    assert b"request body over" in answer
