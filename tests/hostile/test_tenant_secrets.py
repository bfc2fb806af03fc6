"""Issue 14, item 5: tenant acme tries to borrow what belongs to tenant globex: its webhook
signing secret (to have a body acme chose signed as if globex sent it) and its in-process
handlers; and fishes for the names of both in error messages."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from apps.processes import settings_env
from connectors import handlers
from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.client import KadenceClient
from kadence.models import (
    ExecutionRequested,
    HandlerTarget,
    HttpTarget,
    OutcomeStatus,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from kadence.topics import Topics
from testkit.stack import SECRET, Stack, execution_settings, outcomes, until
from testkit.target_server import TargetServer
from testkit.topic_reader import read_topic
from tests.hostile.raw_http import RawReceiver

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
GLOBEX_SECRET = "globex-signing-secret-0123456789"
ACME_SECRET = "acme-signing-secret-9876543210"
SHARED_SECRET = "shared-signing-secret-5555"


@pytest.fixture
def receiver() -> Iterator[RawReceiver]:
    r = RawReceiver().start()
    yield r
    r.stop()


def scoped_settings() -> KadenceSettings:
    return KadenceSettings.model_validate(
        {
            "webhook_secrets": {
                "globex": {"signing-key": GLOBEX_SECRET, "only-globex": GLOBEX_SECRET},
                "acme": {"acme-key": ACME_SECRET},
                "*": {"shared-key": SHARED_SECRET},
            }
        }
    )


def execution(
    tenant: str, target: HttpTarget | HandlerTarget, payload: bytes = b'{"pay":"acme"}'
) -> ExecutionRequested:
    return ExecutionRequested(
        execution_id=f"{tenant}/job@2026-12-01T09:00:00.000Z",
        tenant=tenant,
        job_id="job",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=target,
        payload=payload,
        timeout_ms=5_000,
        lease_ttl_ms=30_000,
    )


def send(tenant: str, url: str, secret_ref: str) -> Result:
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), scoped_settings().webhook_secrets)
    ex = execution(tenant, HttpTarget(url=url, secret_ref=secret_ref))
    return caller(ex, Stop(), time.monotonic() + 5)


def signature(secret: str, msg_id: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def test_acme_cannot_have_globex_secret_sign_its_body(receiver: RawReceiver) -> None:
    result = send("acme", f"{receiver.url}/collect", "only-globex")
    assert result.status is OutcomeStatus.failed
    assert not result.retryable
    assert result.error is not None
    assert result.error.type == "UnknownSecret"
    assert receiver.requests == []  # nothing signed, nothing sent
    assert "globex" not in result.error.message.replace("only-globex", "")
    assert GLOBEX_SECRET not in result.error.message


def test_the_refusal_does_not_tell_whether_another_tenant_has_the_name(
    receiver: RawReceiver,
) -> None:
    elsewhere = send("acme", receiver.url, "signing-key")
    nowhere = send("acme", receiver.url, "no-such-key")
    assert elsewhere.error is not None
    assert nowhere.error is not None
    assert elsewhere.error.message.replace("signing-key", "X") == nowhere.error.message.replace(
        "no-such-key", "X"
    )


def test_each_tenant_signs_with_its_own_secret_of_the_same_name(receiver: RawReceiver) -> None:
    assert send("globex", receiver.url, "signing-key").status is OutcomeStatus.succeeded
    assert send("acme", receiver.url, "acme-key").status is OutcomeStatus.succeeded
    assert send("initech", receiver.url, "shared-key").status is OutcomeStatus.succeeded
    for request, secret in zip(
        receiver.requests, [GLOBEX_SECRET, ACME_SECRET, SHARED_SECRET], strict=True
    ):
        [msg_id], [ts] = request.values("webhook-id"), request.values("webhook-timestamp")
        assert request.values("webhook-signature") == [signature(secret, msg_id, ts, request.body)]


def test_the_old_flat_form_is_refused_saying_how_to_write_it_and_never_echoing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValidationError) as caught:
        KadenceSettings.model_validate({"webhook_secrets": {"signing-key": GLOBEX_SECRET}})
    text = str(caught.value)
    assert '{"<tenant>": {"<secret_ref>": "<secret>"}}' in text
    assert '"*"' in text
    assert GLOBEX_SECRET not in text
    monkeypatch.setenv("KADENCE_WEBHOOK_SECRETS", f'{{"signing-key": "{GLOBEX_SECRET}"}}')
    with pytest.raises(ValidationError) as from_env:
        KadenceSettings()
    assert GLOBEX_SECRET not in str(from_env.value)


@pytest.mark.parametrize(
    "secrets",
    [{"acme corp": {"k": "s"}}, {"acme": {"not a ref": "s"}}, {"acme\n": {"k": "s"}}],
)
def test_secret_scopes_and_names_must_be_identifiers(secrets: object) -> None:
    with pytest.raises(ValidationError):
        KadenceSettings.model_validate({"webhook_secrets": secrets})


def test_secrets_stay_out_of_reprs_and_reach_a_child_intact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = scoped_settings()
    assert GLOBEX_SECRET not in repr(s)
    monkeypatch.setenv("KADENCE_WEBHOOK_SECRETS", settings_env(s)["KADENCE_WEBHOOK_SECRETS"])
    child = KadenceSettings()
    assert child.webhook_secrets["globex"]["signing-key"].get_secret_value() == GLOBEX_SECRET


def call_handler(tenant: str, name: str) -> Result:
    ex = execution(tenant, HandlerTarget(name=name))
    return handlers.call(ex, Stop(), time.monotonic() + 1)


def test_acme_cannot_call_globex_handler_nor_learn_its_handlers() -> None:
    for name in ("globex-export", "globex-billing"):
        handlers.handler(name, tenants=["globex"])(lambda _ex, _stop: None)
    result = call_handler("acme", "globex-export")
    assert result.status is OutcomeStatus.failed
    assert result.error is not None
    assert result.error.type == "UnknownHandler"
    message = result.error.message
    assert "globex-billing" not in message
    assert message == call_handler("acme", "no-such-handler").error.message.replace(  # type: ignore[union-attr]
        "no-such-handler", "globex-export"
    )
    assert call_handler("globex", "globex-export").status is OutcomeStatus.succeeded


def test_a_handler_without_tenants_is_refused_at_registration_saying_how() -> None:
    with pytest.raises(handlers.HandlerScopeError, match=r'tenants=\["<tenant>", \.\.\.\]'):
        handlers.handler("unscoped")


@pytest.mark.slow
def test_on_the_real_stack_acme_borrowing_globex_secret_fails_and_globex_still_runs(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    """Scheduler, reaper and worker as processes: acme's job naming globex's secret_ref fails
    for good without a request; globex's job with the same name is signed with its secret; no
    topic carries the secret."""
    target = TargetServer().start()
    xs = execution_settings(
        settings,
        webhook_secrets={"globex": {"signing-key": GLOBEX_SECRET}, "acme": {"test": SECRET}},
    )
    stack = Stack.start(xs, tmp_path)
    try:
        run_at = datetime.now(UTC) + timedelta(seconds=2)
        jobs = [
            ScheduleDefinition.model_validate(
                {
                    "tenant": tenant,
                    "job_id": "hook",
                    "version": 1,
                    "schedule": {"kind": "once", "run_at": run_at},
                    "target": HttpTarget(url=f"{target.url}/ok", secret_ref="signing-key"),
                    "payload": f'{{"from":"{tenant}"}}'.encode(),
                    "retry": {"max_attempts": 1},
                }
            )
            for tenant in ("acme", "globex")
        ]
        with KadenceClient(xs) as client:
            client.put_many(jobs)
        done = until(lambda: got if len(got := outcomes(xs)) >= 2 else [], 60, "both outcomes")
    finally:
        stack.stop()
        target.stop()
    by_tenant = {o.tenant: o for o in done}
    acme, globex = by_tenant["acme"], by_tenant["globex"]
    assert acme.status is OutcomeStatus.failed
    assert acme.error is not None
    assert acme.error.type == "UnknownSecret"
    assert globex.status is OutcomeStatus.succeeded
    [hit] = target.seen("/ok")
    assert hit.headers["kadence-tenant"] == "globex"
    assert hit.body == b'{"from":"globex"}'
    expected = signature(
        GLOBEX_SECRET, hit.headers["webhook-id"], hit.headers["webhook-timestamp"], hit.body
    )
    assert hit.headers["webhook-signature"] == expected
    topics = Topics(xs)
    for topic in (topics.outcomes, topics.history, topics.executions, topics.dead_letter):
        for msg in read_topic(xs.bootstrap_servers, topic, 100_000, 2):
            assert GLOBEX_SECRET.encode() not in (msg.value() or b"")
