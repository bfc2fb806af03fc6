"""Issue 28, item 6: an SQS key shared by every tenant (`"*"` in KADENCE_SQS_CREDENTIALS) must
not sign for a queue URL a tenant picks: the tenant would point queue_url at its own host and
receive signed requests (and the session token in clear). Keys are bound to queue URL prefixes
(`queue_urls`), matched on the parsed URL; a `"*"` key without them is refused at start."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from connectors.sqs import SqsCaller
from connectors.ssrf import AddressPolicy
from kadence.models import OutcomeStatus, SqsTarget
from kadence.settings import KadenceSettings
from kadence.sqs_keys import AwsKey
from kadence.targets import Stop
from tests.connectors.test_sqs_target import SECRET_KEY, FakeQueue, execution

ACCESS_KEY = "AKIDSHAREDKEY0001"
SESSION = "FQoGZXIvYXdzEXAMPLESESSIONTOKEN"
AWS_PREFIX = "https://sqs.eu-west-1.amazonaws.com/123456789012/"


def key(*queue_urls: str) -> AwsKey:
    value: dict[str, object] = {
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "session_token": SESSION,
    }
    if queue_urls:
        value["queue_urls"] = list(queue_urls)
    return AwsKey.model_validate(value)


@pytest.fixture
def queue() -> Iterator[FakeQueue]:
    q = FakeQueue()
    yield q
    q.stop()


def test_a_shared_key_does_not_sign_for_a_host_the_tenant_picks(queue: FakeQueue) -> None:
    caller = SqsCaller(AddressPolicy(["127.0.0.0/8"]), {"*": {"shared": key(AWS_PREFIX)}})
    target = SqsTarget(queue_url=queue.url(), credentials_ref="shared")  # the tenant's host
    result = caller(execution(target), Stop(), time.monotonic() + 5)
    assert (result.status, result.retryable) == (OutcomeStatus.failed, False)
    assert result.error is not None and result.error.type == "CredentialsNotForQueue"
    assert "'shared'" in result.error.message and queue.url() in result.error.message
    for secret in (ACCESS_KEY, SECRET_KEY, SESSION):
        assert secret not in result.error.message
    assert queue.got == []  # nothing sent: no signature, no session token


def test_a_key_signs_for_the_queues_it_is_bound_to(queue: FakeQueue) -> None:
    bound = f"http://127.0.0.1:{queue.port}/000000000000/"
    caller = SqsCaller(AddressPolicy(["127.0.0.0/8"]), {"*": {"shared": key(AWS_PREFIX, bound)}})
    target = SqsTarget(queue_url=queue.url(), credentials_ref="shared")
    assert caller(execution(target), Stop(), time.monotonic() + 5).status is (
        OutcomeStatus.succeeded
    )
    [(headers, _)] = queue.got
    assert headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/")


def test_a_tenants_own_key_may_still_be_unbound(queue: FakeQueue) -> None:
    caller = SqsCaller(AddressPolicy(["127.0.0.0/8"]), {"acme": {"own": key()}})
    target = SqsTarget(queue_url=queue.url(), credentials_ref="own")
    assert caller(execution(target), Stop(), time.monotonic() + 5).status is (
        OutcomeStatus.succeeded
    )


@pytest.mark.parametrize(
    ("prefix", "url", "covered"),
    [
        (AWS_PREFIX, f"{AWS_PREFIX}orders", True),
        (AWS_PREFIX, "https://SQS.eu-west-1.amazonaws.com/123456789012/orders", True),
        (AWS_PREFIX, "https://sqs.eu-west-1.amazonaws.com:443/123456789012/orders", True),
        (AWS_PREFIX, "https://sqs.eu-west-1.amazonaws.com/1234567890123/orders", False),
        (AWS_PREFIX, "http://sqs.eu-west-1.amazonaws.com/123456789012/orders", False),
        (AWS_PREFIX, "https://sqs.eu-west-1.amazonaws.com:8443/123456789012/orders", False),
        (AWS_PREFIX, "https://sqs.eu-west-1.amazonaws.com.evil.io/123456789012/orders", False),
        (AWS_PREFIX, "https://sqs.eu-west-1.amazonaws.com@evil.io/123456789012/orders", False),
        ("https://sqs.x.com", "https://sqs.x.com/1/q", True),
        ("https://sqs.x.com", "https://sqs.x.com.evil.io/1/q", False),
        ("https://sqs.x.com", "https://evil.io/sqs.x.com/q", False),
        ("https://sqs.x.com/123", "https://sqs.x.com/123/q", True),
        ("https://sqs.x.com/123", "https://sqs.x.com/1234/q", False),
        ("https://[fd00::1]:9324/", "https://[fd00::1]:9324/1/q", True),
        ("https://[fd00::1]:9324/", "https://[fd00::1]/1/q", False),
    ],
)
def test_queue_urls_match_on_the_parsed_url(prefix: str, url: str, covered: bool) -> None:
    assert key(prefix).may_sign_for(url) is covered


def test_a_shared_key_without_queue_urls_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = {"*": {"shared": key().model_dump(mode="json", exclude_none=True)}}
    value["*"]["shared"]["secret_access_key"] = SECRET_KEY
    monkeypatch.setenv("KADENCE_SQS_CREDENTIALS", json.dumps(value))
    with pytest.raises(ValidationError) as err:
        KadenceSettings()
    text = str(err.value)
    assert "queue_urls" in text and "'shared'" in text and AWS_PREFIX in text  # how to fix
    for secret in (ACCESS_KEY, SECRET_KEY, SESSION):
        assert secret not in text
    value["*"]["shared"]["queue_urls"] = [AWS_PREFIX]
    monkeypatch.setenv("KADENCE_SQS_CREDENTIALS", json.dumps(value))
    assert KadenceSettings().sqs_credentials["*"]["shared"].queue_urls == [AWS_PREFIX]


@pytest.mark.parametrize(
    "prefix",
    ["sqs.x.com/1/", "ftp://sqs.x.com/", "https://user:pw@sqs.x.com/", "https://sqs.x.com/?a=1"],
)
def test_a_queue_url_prefix_must_be_a_plain_http_url(prefix: str) -> None:
    with pytest.raises(ValidationError) as err:
        key(prefix)
    assert SECRET_KEY not in str(err.value)


def test_an_empty_queue_urls_list_is_refused() -> None:
    with pytest.raises(ValidationError, match="at least one"):
        AwsKey.model_validate(
            {"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY, "queue_urls": []}
        )
