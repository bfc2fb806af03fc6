"""Issue 41, item 4: a few idle, half-sent connections locked every caller out of the API.

uvicorn held KADENCE_API_MAX_CONNECTIONS connections and nothing bounded how long a request
head could take: more idle connections than that (a request line and no end of headers, or a
connect and nothing) got every caller a 503 for as long as they stayed open, without a token.
Here `python -m apps.api` runs as it does in production, with the query view behind it: past
more idle connections than it may hold, a caller with a token is answered 200 at once, and the
idle connections are closed, the newest of them at the head timeout."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from pydantic import SecretStr

from apps.api.auth import token_hash
from apps.processes import ChildProcess
from kadence.provisioning import delete_namespace
from testkit.stack import until
from tests.conftest import provisioned

pytestmark = [pytest.mark.kafka]
MAX_CONNECTIONS = 8
HEAD_TIMEOUT_S = 3.0
TOKEN = "tok-acme-slow-clients"
VIEW_TOKEN = "view-token-slow-clients"


@pytest.fixture
def api_port(kafka_bootstrap: str, tmp_path: Path) -> Iterator[int]:
    """The API and the query view as child processes on ports they pick, on a namespace of
    their own; both stopped, and the namespace deleted, also when a step fails."""
    base = provisioned(kafka_bootstrap, partitions=1, execution_partitions=1).model_copy(
        update={"view_token": SecretStr(VIEW_TOKEN), "state_dir": tmp_path / "state"}
    )
    with ExitStack() as cleanup:
        cleanup.callback(delete_namespace, base)
        view = ChildProcess(
            "apps.views",
            base.model_copy(update={"instance_id": "v", "view_port": 0}),
            log=tmp_path / "views.log",
        )
        cleanup.callback(view.stop)
        view_port = view.start().listening("view", timeout=60)
        settings = base.model_copy(
            update={
                "api_port": 0,
                "view_url": f"http://127.0.0.1:{view_port}",
                "api_tokens": {token_hash(TOKEN): "acme"},
                "api_max_connections": MAX_CONNECTIONS,
                "api_head_timeout_s": HEAD_TIMEOUT_S,
            }
        )
        api = ChildProcess("apps.api", settings, log=tmp_path / "api.log")
        cleanup.callback(api.stop)
        port = api.start().listening("api", timeout=60)
        until(lambda: jobs(port)[0] == 200, 60, "the API answering through the query view")
        yield port


def jobs(port: int) -> tuple[int, float]:
    """`GET /v1/jobs` with the token, on a connection of its own: the status, and the seconds
    from connecting to the answer's first line."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(
            b"GET /v1/jobs HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer "
            + TOKEN.encode()
            + b"\r\nConnection: close\r\n\r\n"
        )
        answer = b""
        while b"\r\n" not in answer:
            data = conn.recv(65536)
            if not data:
                break
            answer += data
    took = time.monotonic() - started
    parts = answer.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), took


def closed_at(conn: socket.socket, since: float) -> float:
    """Seconds from `since` until the server closes `conn`; TimeoutError when it keeps it
    open past the head timeout and a margin."""
    conn.settimeout(max(0.1, since + HEAD_TIMEOUT_S + 3 - time.monotonic()))
    try:
        while conn.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - since


def test_idle_half_sent_connections_cannot_lock_out_a_caller_with_a_token(api_port: int) -> None:
    idle: list[socket.socket] = []
    try:
        opened = time.monotonic()
        for i in range(MAX_CONNECTIONS + 4):
            conn = socket.create_connection(("127.0.0.1", api_port), timeout=10)
            idle.append(conn)
            if i % 2 == 0:  # a request line and no end of headers; the others send nothing
                conn.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: api\r\n")
        for _ in range(3):
            status, took = jobs(api_port)
            assert status == 200  # it was 503: every slot held by the idle connections
            assert took < HEAD_TIMEOUT_S  # not let in by an idle connection timing out
        closed = [closed_at(conn, opened) for conn in idle]
    finally:
        for conn in idle:
            conn.close()
    assert max(closed) >= HEAD_TIMEOUT_S - 0.5  # the newest lived until their head's deadline
    assert max(closed) < HEAD_TIMEOUT_S + 3
