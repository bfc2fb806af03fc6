"""The webhook target against a real HTTP server on loopback."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from connectors.http import HttpCaller, UnknownSecretError, secret_for, sign
from connectors.ssrf import AddressPolicy
from kadence.models import ErrorInfo, ExecutionRequested, HttpTarget, OutcomeStatus
from kadence.targets import Result, Stop
from testkit.stack import SECRET
from testkit.target_server import TargetServer

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer().start()
    yield srv
    srv.stop()


def execution(
    url: str, timeout_ms: int = 5_000, secret_ref: str | None = "test"
) -> ExecutionRequested:
    return ExecutionRequested(
        execution_id="acme/job@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="job",
        definition_version=1,
        attempt=2,
        delivery=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HttpTarget(url=url, secret_ref=secret_ref, headers={"x-team": "ops"}),
        payload=b'{"a":1}',
        timeout_ms=timeout_ms,
        lease_ttl_ms=30_000,
    )


def caller(allow: list[str] | None = None) -> HttpCaller:
    return HttpCaller(
        AddressPolicy(["127.0.0.0/8"] if allow is None else allow),
        {"acme": {"test": SecretStr(SECRET)}},
    )


def call(c: HttpCaller, ex: ExecutionRequested, stop: Stop | None = None) -> Result:
    return c(ex, stop or Stop(), time.monotonic() + ex.timeout_ms / 1000)


def err(result: Result) -> ErrorInfo:
    assert result.error is not None
    return result.error


def test_success_carries_the_key_attempt_and_a_valid_signature(server: TargetServer) -> None:
    result = call(caller(), execution(f"{server.url}/ok?x=1"))
    assert result.status is OutcomeStatus.succeeded
    [hit] = server.seen("/ok")
    h = hit.headers
    assert h["idempotency-key"] == h["webhook-id"] == "acme/job@2026-12-01T09:00:00.000Z"
    assert (h["kadence-attempt"], h["kadence-delivery"], h["x-team"]) == ("2", "1", "ops")
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    mac = hmac.new(
        key, f"{h['webhook-id']}.{h['webhook-timestamp']}.".encode() + hit.body, hashlib.sha256
    )
    assert h["webhook-signature"] == "v1," + base64.b64encode(mac.digest()).decode()
    assert abs(int(h["webhook-timestamp"]) - time.time()) < 5


def test_a_plain_secret_signs_with_its_bytes() -> None:
    expected = hmac.new(b"plain", b"id.1.body", hashlib.sha256).digest()
    assert sign("plain", "id", 1, b"body") == "v1," + base64.b64encode(expected).decode()


def test_5xx_is_retryable_and_names_the_status_and_body(server: TargetServer) -> None:
    result = call(caller(), execution(f"{server.url}/fail"))
    assert result.status is OutcomeStatus.failed
    assert result.retryable
    assert err(result).code == "503"
    assert "target is down" in err(result).message


def test_redirects_are_not_followed_even_to_an_allowed_place(server: TargetServer) -> None:
    to = "http://169.254.169.254/latest/meta-data/"
    result = call(caller(), execution(f"{server.url}/redirect?to={to}"))
    assert result.status is OutcomeStatus.failed
    assert not result.retryable
    assert (
        "redirect to http://169.254.169.254/latest/meta-data/ not followed" in err(result).message
    )
    assert len(server.seen()) == 1


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9/", "http://10.0.0.1/", "http://169.254.169.254/", "http://localhost:9/"],
)
def test_private_targets_are_refused_before_connecting(url: str) -> None:
    result = call(caller(allow=[]), execution(url))
    assert result.status is OutcomeStatus.failed
    assert not result.retryable
    assert err(result).type == "AddressRefused"


def test_a_hanging_target_times_out(server: TargetServer) -> None:
    started = time.monotonic()
    result = call(caller(), execution(f"{server.url}/hang", timeout_ms=1_000))
    assert result.status is OutcomeStatus.timed_out
    assert 0.9 <= time.monotonic() - started < 5


def test_stop_interrupts_a_request_in_flight(server: TargetServer) -> None:
    stop = Stop()
    threading.Timer(0.5, lambda: stop.set(OutcomeStatus.cancelled)).start()
    started = time.monotonic()
    result = call(caller(), execution(f"{server.url}/slow?s=30", timeout_ms=60_000), stop)
    assert result.status is OutcomeStatus.cancelled
    assert time.monotonic() - started < 5


def test_an_unknown_secret_ref_fails_without_sending(server: TargetServer) -> None:
    ex = execution(f"{server.url}/ok").model_copy(
        update={"target": HttpTarget(url=f"{server.url}/ok", secret_ref="nope")}
    )
    result = call(caller(), ex)
    assert err(result).type == "UnknownSecret"
    assert err(result).message.startswith("secret_ref 'nope' is unknown for tenant 'acme'")
    assert server.seen() == []


def test_a_secret_is_looked_up_under_the_tenant_then_the_shared_scope() -> None:
    own, shared = SecretStr("own"), SecretStr("shared")
    secrets = {"acme": {"a": own}, "*": {"a": shared, "s": shared}, "globex": {"g": own}}
    assert secret_for(secrets, "acme", "a") is own
    assert secret_for(secrets, "acme", "s") is shared
    assert secret_for(secrets, "initech", "a") is shared
    with pytest.raises(UnknownSecretError):
        secret_for(secrets, "acme", "g")


def test_kadence_headers_win_over_the_jobs_in_any_case(server: TargetServer) -> None:
    forged = {
        "Idempotency-Key": "forged",
        "WEBHOOK-SIGNATURE": "v1,forged",
        "Kadence-Tenant": "globex",
        "kadence-job ": "other",
        "Content-Length": "0",
        "Host": "internal.example",
        "x-team": "ops",
    }
    # model_copy: "kadence-job " is no longer a valid name; the worker still drops it
    target = HttpTarget(url=f"{server.url}/ok", secret_ref="test").model_copy(
        update={"headers": forged}
    )
    ex = execution(target.url).model_copy(update={"target": target})
    headers = caller().headers(ex, target, ex.payload)
    by_name: dict[str, list[str]] = {}
    for name, value in headers.items():
        by_name.setdefault(name.strip().lower(), []).append(value)
    assert by_name["idempotency-key"] == [ex.execution_id]
    assert by_name["kadence-tenant"] == ["acme"]
    assert by_name["kadence-job"] == ["job"]
    assert by_name["webhook-signature"] != ["v1,forged"]
    assert len(by_name["webhook-signature"]) == 1
    assert "content-length" not in by_name
    assert "host" not in by_name
    assert by_name["x-team"] == ["ops"]


def test_a_connection_refused_is_retryable() -> None:
    result = call(caller(), execution("http://127.0.0.1:9/"))
    assert result.status is OutcomeStatus.failed
    assert result.retryable
