"""Issue 14, item 10: a tenant forges Kadence's own headers through its target's headers in
another case, reaches internal addresses through IPv6 prefixes that embed or route to them, and
slips a newline into an identifier."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, ValidationError

from apps.api.app import create_app
from apps.api.auth import token_hash
from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.models import ExecutionRequested, HttpTarget, KafkaTarget, OutcomeStatus
from kadence.models.base import Identifier, split_job_key
from kadence.models.commands import RequestId
from kadence.settings import KadenceSettings
from kadence.targets import Stop
from tests.hostile.raw_http import RawReceiver

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
EXECUTION_ID = "acme/job@2026-12-01T09:00:00.000Z"


@pytest.fixture
def receiver() -> Iterator[RawReceiver]:
    r = RawReceiver().start()
    yield r
    r.stop()


def test_target_headers_cannot_forge_kadence_headers_in_any_case(receiver: RawReceiver) -> None:
    forged = {
        "Idempotency-Key": "forged",
        "WEBHOOK-ID": "forged",
        "Webhook-Signature": "v1,Zm9yZ2Vk",
        "Webhook-Timestamp": "1",
        "Kadence-Tenant": "globex",
        "KADENCE-JOB": "globex-job",
        "kadence-Execution-ID": "globex/job@2026-12-01T09:00:00.000Z",
        "Kadence-Attempt": "99",
        "User-Agent": "not-kadence",
        "x-team": "ops",
    }
    target = HttpTarget(url=f"{receiver.url}/hook", headers=forged)
    ex = ExecutionRequested(
        execution_id=EXECUTION_ID,
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=target,
        payload=b"{}",
        timeout_ms=5_000,
        lease_ttl_ms=30_000,
    )
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {})
    assert caller(ex, Stop(), time.monotonic() + 5).status is OutcomeStatus.succeeded
    [request] = receiver.requests
    assert request.values("idempotency-key") == [EXECUTION_ID]
    assert request.values("webhook-id") == [EXECUTION_ID]
    assert request.values("webhook-signature") == []  # no secret_ref: no signature at all
    assert request.values("kadence-tenant") == ["acme"]
    assert request.values("kadence-job") == ["job"]
    assert request.values("kadence-execution-id") == [EXECUTION_ID]
    assert request.values("kadence-attempt") == ["1"]
    assert request.values("user-agent") == ["Kadence-Webhook/1"]
    assert int(request.values("webhook-timestamp")[0]) > 1
    assert request.values("x-team") == ["ops"]


def test_target_headers_cannot_change_the_request_framing(receiver: RawReceiver) -> None:
    """A second Content-Length or Transfer-Encoding would let a tenant smuggle a request past a
    proxy in front of the target; a Host would pick a virtual host the URL does not name."""
    target = HttpTarget(
        url=f"{receiver.url}/hook",
        headers={"Content-Length": "0", "Transfer-Encoding": "chunked", "HOST": "internal"},
    )
    ex = ExecutionRequested(
        execution_id=EXECUTION_ID,
        tenant="acme",
        job_id="job",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=target,
        payload=b'{"a":1}',
        timeout_ms=5_000,
        lease_ttl_ms=30_000,
    )
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {})
    caller(ex, Stop(), time.monotonic() + 5)
    [request] = receiver.requests
    assert request.values("content-length") == ["7"]
    assert request.values("transfer-encoding") == []
    assert request.values("host") == [receiver.url.removeprefix("http://")]
    assert request.body == b'{"a":1}'


@pytest.mark.parametrize(
    "address",
    [
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254
        "fec0::1",  # site-local
    ],
)
def test_ipv6_prefixes_that_reach_inside_are_refused(address: str) -> None:
    assert AddressPolicy().why_refused(ipaddress.ip_address(address)) is not None


def test_an_allow_list_entry_with_a_port_opens_that_port_only() -> None:
    policy = AddressPolicy(
        KadenceSettings(target_allow_cidrs=["10.0.0.0/8:8443"]).target_allow_cidrs
    )
    assert policy.why_refused(ipaddress.ip_address("10.1.2.3"), 8443) is None
    assert policy.why_refused(ipaddress.ip_address("10.1.2.3"), 6379) is not None


def test_an_id_with_a_trailing_newline_is_refused_everywhere() -> None:
    with pytest.raises(ValueError, match="not a job key"):
        split_job_key("acme/job\n")
    with pytest.raises(ValueError, match="not a job key"):
        split_job_key("acme\n/job")
    app = create_app(KadenceSettings(api_tokens={token_hash("tok"): "acme"}))
    client = TestClient(app, raise_server_exceptions=False)
    for method in ("GET", "PUT", "DELETE"):
        r = client.request(
            method, "/v1/jobs/job%0A", headers={"Authorization": "Bearer tok"}, json={}
        )
        assert r.status_code == 422, (method, r.status_code, r.text)


class _Fields(BaseModel):
    ident: Identifier | None = None
    request_id: RequestId | None = None


@pytest.mark.parametrize(
    "doc",
    [{"ident": "job\n"}, {"request_id": "req\n"}],
)
def test_model_patterns_refuse_a_trailing_newline(doc: dict[str, str]) -> None:
    """pydantic matches with Rust's regex, whose `$` is the end of the text: a guard that this
    stays so (a switch to Python's re engine would let "job\\n" through)."""
    with pytest.raises(ValidationError):
        _Fields.model_validate(doc)
    with pytest.raises(ValidationError):
        KafkaTarget(topic="orders\n")
    with pytest.raises(ValidationError):
        KadenceSettings(namespace="kadence\n")
