"""The SQS target against a real SQS-compatible server (ElasticMQ, started here from Maven
Central's jars; issue 18, item 4): FIFO deduplication by the idempotency key, the attributes a
consumer reads, bodies SQS cannot carry as text, the server's refusals, and a job run by the
whole stack on a real broker into a queue."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from connectors.sqs import SqsCaller
from connectors.ssrf import AddressPolicy
from infra.elasticmq.server import ElasticMQ
from kadence.client import KadenceClient
from kadence.models import (
    ExecutionRequested,
    OutcomeStatus,
    QueueFormat,
    ScheduleDefinition,
    SqsTarget,
)
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from testkit.stack import Stack, applied_successes, execution_settings, until
from tests.conftest import IN_CI
from tests.connectors.test_sqs_target import execution

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def sqs() -> Iterator[ElasticMQ]:
    server = ElasticMQ()
    try:
        server.start()
    except Exception as exc:  # no Java or no Maven here: a laptop may skip, CI may not
        if IN_CI:
            pytest.fail(f"ElasticMQ did not start (CI=true: never skipped): {exc}", pytrace=False)
        pytest.skip(f"ElasticMQ did not start: {exc}")
    yield server
    server.stop()


def send(ex: ExecutionRequested) -> Result:
    caller = SqsCaller(AddressPolicy(["127.0.0.0/8"]), {})
    return caller(ex, Stop(), time.monotonic() + 10)


def attributes(msg: dict[str, Any]) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in msg["MessageAttributes"].items()}


def test_a_fifo_queue_keeps_one_message_per_run_whatever_the_attempts(sqs: ElasticMQ) -> None:
    url = sqs.create_queue("runs.fifo")
    target = SqsTarget(queue_url=url)
    first = execution(target)
    again = execution(target, attempt=1, delivery=2)  # a redelivery after a worker died
    other = execution(target, execution_id="acme/orders@2026-12-01T09:01:00.000Z")
    for ex in (first, again, first, other):
        assert send(ex).status is OutcomeStatus.succeeded
    got = sqs.receive(url) + sqs.receive(url)
    assert sorted(attributes(m)["kadence-execution-id"] for m in got) == [
        "acme/orders@2026-12-01T09:00:00.000Z",
        "acme/orders@2026-12-01T09:01:00.000Z",
    ]
    msg = got[0]
    assert msg["Body"] == "ship order 42"
    assert attributes(msg)["kadence-tenant"] == "acme"
    assert attributes(msg)["kadence-due-at"] == "2026-12-01T09:00:00.000Z"


def test_a_standard_queue_gets_binary_as_base64_and_the_json_envelope(sqs: ElasticMQ) -> None:
    url = sqs.create_queue("runs")
    binary = b"\x00\xffraw"
    assert send(execution(SqsTarget(queue_url=url), binary)).status is OutcomeStatus.succeeded
    envelope = SqsTarget(queue_url=url, format=QueueFormat.json)
    json_run = execution(envelope, b'{"order": 42}', execution_id="acme/orders@json")
    assert send(json_run).status is OutcomeStatus.succeeded
    got = {attributes(m)["kadence-execution-id"]: m for m in sqs.receive(url) + sqs.receive(url)}
    raw = got["acme/orders@2026-12-01T09:00:00.000Z"]
    assert attributes(raw)["kadence-body-encoding"] == "base64"
    assert base64.b64decode(raw["Body"]) == binary
    doc = json.loads(got["acme/orders@json"]["Body"])
    assert (doc["execution_id"], doc["payload"]) == ("acme/orders@json", '{"order": 42}')


def test_the_servers_refusals_fail_for_good_with_its_reason(sqs: ElasticMQ) -> None:
    missing = send(execution(SqsTarget(queue_url=sqs.queue_url("no-such-queue"))))
    assert (missing.status, missing.retryable) == (OutcomeStatus.failed, False)
    assert missing.error is not None and missing.error.code == "QueueDoesNotExist"
    url = sqs.create_queue("limits")
    too_big = send(execution(SqsTarget(queue_url=url), b"x" * (300 * 1024)))  # over 256 KiB
    assert (too_big.status, too_big.retryable) == (OutcomeStatus.failed, False)
    assert too_big.error is not None and too_big.error.type == "SqsError"


def test_without_an_allowance_the_local_queue_is_never_reached(sqs: ElasticMQ) -> None:
    url = sqs.create_queue("guarded")
    caller = SqsCaller(AddressPolicy([]), {})
    result = caller(execution(SqsTarget(queue_url=url)), Stop(), time.monotonic() + 10)
    assert result.error is not None and result.error.type == "AddressRefused"
    assert sqs.receive(url, wait_s=0) == []


@pytest.mark.kafka
def test_a_scheduled_job_reaches_the_queue_through_the_stack(
    sqs: ElasticMQ, settings: KadenceSettings, tmp_path: Path
) -> None:
    url = sqs.create_queue("stack.fifo")
    xsettings = execution_settings(
        settings,
        sqs_credentials={
            "acme": {"q": {"access_key_id": "AKIDEXAMPLE00001", "secret_access_key": "s3cr3t"}}
        },
    )
    run_at = datetime.now(UTC) + timedelta(seconds=3)
    job = ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "to-sqs",
            "version": 1,
            "schedule": {"kind": "once", "run_at": run_at},
            "target": SqsTarget(queue_url=url, credentials_ref="q"),
            "payload": b"ship order 42",
        }
    )
    stack = Stack.start(xsettings, tmp_path)
    try:
        with KadenceClient(xsettings) as client:
            client.put_many([job])
        until(lambda: applied_successes(xsettings, "to-sqs"), 60, "the run's success")
    finally:
        stack.stop()
    [msg] = sqs.receive(url)
    assert msg["Body"] == "ship order 42"
    assert attributes(msg)["kadence-execution-id"].startswith("acme/to-sqs@")
    for log in tmp_path.glob("*.log"):
        assert "s3cr3t" not in log.read_text(errors="replace")  # the key never reaches a log
