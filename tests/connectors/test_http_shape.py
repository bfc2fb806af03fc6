"""A webhook's request shape against a real HTTP server on loopback: its method (GET and DELETE
without content unless the run has a payload), its query parameters, and which statuses succeed
or retry (HttpTarget.method, query, success_statuses, retryable_statuses)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.models import ExecutionRequested, HttpTarget, OutcomeStatus
from kadence.targets import Result, Stop
from testkit.stack import SECRET
from testkit.target_server import Hit, TargetServer

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.stop()


@pytest.fixture
def caller() -> Iterator[HttpCaller]:
    c = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {"acme": {"test": SecretStr(SECRET)}})
    yield c
    c.loop.close()


def run(c: HttpCaller, url: str, payload: bytes = b"", **target: Any) -> Result:
    ex = ExecutionRequested(
        execution_id="acme/job@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HttpTarget(url=url, secret_ref="test", **target),
        payload=payload,
        content_type="application/json",
        timeout_ms=5_000,
        lease_ttl_ms=30_000,
    )
    return c(ex, Stop(), time.monotonic() + 5)


def signed(hit: Hit) -> bool:
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    msg = f"{hit.headers['webhook-id']}.{hit.headers['webhook-timestamp']}.".encode() + hit.body
    mac = base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()
    return hit.headers["webhook-signature"] == f"v1,{mac}"


def test_a_get_sends_its_query_after_the_urls_own_and_no_content(
    server: TargetServer, caller: HttpCaller
) -> None:
    query = {"q": "a b&c=d", "city": "Zürich", "empty": ""}
    result = run(caller, f"{server.url}/ok?page=2#frag", method="GET", query=query)
    assert result.status is OutcomeStatus.succeeded
    [hit] = server.seen("/ok")
    assert hit.method == "GET"
    assert hit.query == "page=2&q=a%20b%26c%3Dd&city=Z%C3%BCrich&empty="
    assert "content-length" not in hit.headers
    assert "content-type" not in hit.headers
    assert hit.body == b""
    assert signed(hit)  # over the empty body


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_a_get_or_delete_with_a_payload_sends_it(
    method: str, server: TargetServer, caller: HttpCaller
) -> None:
    result = run(caller, f"{server.url}/ok", b'{"query":{}}', method=method)
    assert result.status is OutcomeStatus.succeeded
    [hit] = server.seen("/ok")
    assert (hit.method, hit.body) == (method, b'{"query":{}}')
    assert hit.headers["content-length"] == "12"
    assert hit.headers["content-type"] == "application/json"
    assert signed(hit)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_post_put_and_patch_always_send_content(
    method: str, server: TargetServer, caller: HttpCaller
) -> None:
    assert run(caller, f"{server.url}/ok", method=method).status is OutcomeStatus.succeeded
    [hit] = server.seen("/ok")
    assert hit.method == method
    assert (hit.headers["content-length"], hit.headers["content-type"]) == ("0", "application/json")


def test_requests_without_content_keep_the_connection_serving(
    server: TargetServer, caller: HttpCaller
) -> None:
    for method in ("GET", "DELETE", "POST", "GET"):
        assert run(caller, f"{server.url}/ok", method=method).status is OutcomeStatus.succeeded
    assert [h.method for h in server.seen("/ok")] == ["GET", "DELETE", "POST", "GET"]
    assert server.connections == 1


@pytest.mark.parametrize(
    ("success", "code", "ok"),
    [
        (None, 204, True),
        (None, 299, True),
        (["204"], 204, True),
        (["204"], 200, False),
        (["200-202", "418"], 418, True),
        (["200-202", "418"], 203, False),
        (["3xx"], 302, True),
        ([200, "404"], 404, True),
    ],
)
def test_success_is_what_the_target_names(
    success: list[Any] | None, code: int, ok: bool, server: TargetServer, caller: HttpCaller
) -> None:
    result = run(caller, f"{server.url}/status?code={code}", success_statuses=success)
    assert (result.status is OutcomeStatus.succeeded) is ok
    if not ok:
        assert result.error is not None
        assert result.error.code == str(code)
    assert len(server.seen("/status")) == 1  # a 3xx is never followed


@pytest.mark.parametrize(
    ("retryable", "code", "retried"),
    [
        (None, 503, True),
        (None, 429, True),
        (None, 409, False),
        (["409", "5xx"], 409, True),
        (["409"], 503, False),
        ([], 503, False),
        ([], 429, False),
    ],
)
def test_failing_statuses_retry_as_the_target_names(
    retryable: list[str] | None, code: int, retried: bool, server: TargetServer, caller: HttpCaller
) -> None:
    result = run(caller, f"{server.url}/status?code={code}", retryable_statuses=retryable)
    assert result.status is OutcomeStatus.failed
    assert result.retryable is retried


def test_a_failure_names_the_url_with_its_query(server: TargetServer, caller: HttpCaller) -> None:
    result = run(caller, f"{server.url}/status?code=400", query={"a": "1"})
    assert result.error is not None
    assert f"400 Bad Request from {server.url}/status?code=400&a=1" in result.error.message
