"""Issue 28, item 6: a private network allowed for one tenant's targets (its SQS endpoint, its
internal webhook) must stay closed to every other tenant; and no allow-list network, however
wide, opens a cloud metadata address unless an entry names that very address."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from connectors.http import HttpCaller
from connectors.sqs import SqsCaller
from connectors.ssrf import AddressPolicy, AddressRefused
from kadence.models import ExecutionRequested, HttpTarget, OutcomeStatus, SqsTarget
from kadence.settings import KadenceSettings
from kadence.targets import Stop
from tests.connectors.test_sqs_target import FakeQueue
from tests.connectors.test_sqs_target import execution as sqs_execution
from tests.hostile.raw_http import RawReceiver


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.fixture
def receiver() -> Iterator[RawReceiver]:
    r = RawReceiver().start()
    yield r
    r.stop()


@pytest.fixture
def queue() -> Iterator[FakeQueue]:
    q = FakeQueue()
    yield q
    q.stop()


def webhook(url: str, tenant: str) -> ExecutionRequested:
    ex = sqs_execution(
        SqsTarget(queue_url="https://sqs.eu-west-1.amazonaws.com/1/q"),
        tenant=tenant,
        execution_id=f"{tenant}/orders@x",
    )
    return ex.model_copy(update={"target": HttpTarget(url=url)})


def tenant_policy() -> AddressPolicy:
    settings = KadenceSettings.model_validate(
        {"target_allow_cidrs_by_tenant": {"acme": ["127.0.0.0/8"]}}
    )
    return AddressPolicy(settings.target_allow_cidrs, settings.target_allow_cidrs_by_tenant)


def test_a_tenants_network_is_open_to_its_targets_only() -> None:
    policy = AddressPolicy(by_tenant={"acme": ["10.1.0.0/16:443", "fd00:1::/64"]})
    assert policy.why_refused(ip("10.1.2.3"), 443, "acme") is None
    assert policy.why_refused(ip("fd00:1::5"), 9324, "acme") is None
    assert policy.why_refused(ip("10.1.2.3"), 8443, "acme") == "a private address"
    for other in ("globex", None):
        assert policy.why_refused(ip("10.1.2.3"), 443, other) == "a private address"
        assert policy.why_refused(ip("fd00:1::5"), 9324, other) is not None
    with pytest.raises(AddressRefused, match="ALLOW_CIDRS_BY_TENANT"):
        policy.check_all("127.0.0.1", 443, [ip("127.0.0.1")], "globex")


def test_a_webhook_of_another_tenant_cannot_reach_the_allowed_network(
    receiver: RawReceiver,
) -> None:
    caller = HttpCaller(tenant_policy(), {})
    result = caller(webhook(f"{receiver.url}/hook", "globex"), Stop(), time.monotonic() + 5)
    assert (result.status, result.retryable) == (OutcomeStatus.failed, False)
    assert result.error is not None and result.error.type == "AddressRefused"
    assert receiver.requests == []  # nothing reached it
    ok = caller(webhook(f"{receiver.url}/hook", "acme"), Stop(), time.monotonic() + 5)
    assert ok.status is OutcomeStatus.succeeded
    assert len(receiver.requests) == 1


def test_a_queue_of_another_tenant_cannot_reach_the_allowed_network(queue: FakeQueue) -> None:
    caller = SqsCaller(tenant_policy(), {})
    target = SqsTarget(queue_url=queue.url())
    other = sqs_execution(target, tenant="globex", execution_id="globex/orders@x")
    result = caller(other, Stop(), time.monotonic() + 5)
    assert result.error is not None and result.error.type == "AddressRefused"
    assert queue.got == []
    assert caller(sqs_execution(target), Stop(), time.monotonic() + 5).status is (
        OutcomeStatus.succeeded
    )


@pytest.mark.parametrize(
    ("allow", "address"),
    [
        (["169.254.0.0/16"], "169.254.169.254"),
        (["169.254.0.0/16"], "169.254.170.2"),
        (["169.254.169.0/24:80"], "169.254.169.254"),
        (["0.0.0.0/0"], "100.100.100.200"),
        (["100.64.0.0/10"], "100.100.100.200"),
        (["::/0"], "fd00:ec2::254"),
        (["fd00::/8"], "fd00:ec2::254"),
        (["169.254.0.0/16"], "::ffff:169.254.169.254"),
        (["169.254.169.253/32"], "169.254.169.254"),
    ],
)
def test_a_wide_network_never_opens_a_metadata_address(allow: list[str], address: str) -> None:
    assert AddressPolicy(allow).why_refused(ip(address), 80) == "a cloud metadata address"
    tenant = AddressPolicy(by_tenant={"acme": allow})
    assert tenant.why_refused(ip(address), 80, "acme") == "a cloud metadata address"


def test_the_wide_network_still_opens_the_rest_of_itself() -> None:
    assert AddressPolicy(["169.254.0.0/16"]).why_refused(ip("169.254.1.1"), 80) is None


def test_an_entry_naming_the_metadata_address_exactly_opens_it() -> None:
    assert AddressPolicy(["169.254.169.254/32"]).why_refused(ip("169.254.169.254"), 80) is None
    assert AddressPolicy(["[fd00:ec2::254/128]:80"]).why_refused(ip("fd00:ec2::254"), 80) is None
    assert AddressPolicy(["169.254.169.254/32:80"]).why_refused(ip("169.254.169.254"), 443) == (
        "a cloud metadata address"
    )
    acme = AddressPolicy(by_tenant={"acme": ["169.254.169.254/32"]})
    assert acme.why_refused(ip("169.254.169.254"), 80, "acme") is None
    assert acme.why_refused(ip("169.254.169.254"), 80, "globex") == "a cloud metadata address"
    with pytest.raises(AddressRefused, match=r"metadata.*exactly this address"):
        AddressPolicy(["169.254.0.0/16"]).check_all(
            "169.254.169.254", 80, [ip("169.254.169.254")], "acme"
        )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"*": ["10.0.0.0/8"]}, "KADENCE_TARGET_ALLOW_CIDRS"),
        ({"not a tenant": ["10.0.0.0/8"]}, "not a tenant identifier"),
        ({"acme": ["10.0.0.0/8:99999"]}, "port must be"),
        ({"acme": ["intranet"]}, "is not a network"),
    ],
)
def test_the_per_tenant_setting_refuses_what_it_cannot_apply(
    value: dict[str, list[str]], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        KadenceSettings.model_validate({"target_allow_cidrs_by_tenant": value})


def test_the_per_tenant_setting_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KADENCE_TARGET_ALLOW_CIDRS_BY_TENANT", '{"acme": ["10.1.0.0/16:443"]}')
    assert KadenceSettings().target_allow_cidrs_by_tenant == {"acme": ["10.1.0.0/16:443"]}
