"""The worker's last guard (issue 43, item 7): an execution whose JSON envelope would exceed the
broker's record limit (a definition stored before the model refused its payload) produces
nothing, and its run fails at once and for good (`RecordTooLarge`, not retryable, so it is
dead-lettered without retries that cannot succeed); the worker goes on with the next run. The
real Kafka target on the in-memory cluster, on both delivery paths; no broker."""

from __future__ import annotations

import pytest

from kadence.codec import Codec
from kadence.envelope import TOO_LARGE
from kadence.errors import RecordTooLargeError
from kadence.models import (
    MAX_PAYLOAD_BYTES,
    DeliveryFormat,
    ExecutionOutcome,
    ExecutionRequested,
    KafkaTarget,
    OutcomeStatus,
)
from kadence.settings import KadenceSettings
from kadence.sizing import RECORD_LIMIT
from kadence.targets import Stop
from kadence.topics import OUTCOMES
from testkit.driver import Driver
from tests.connectors.test_kafka_topic_forward import target
from tests.driver.test_delivery_guarantee import execution, offline_kafka

CONTROL = b"\x01" * MAX_PAYLOAD_BYTES
JSON = KafkaTarget(topic="orders", format=DeliveryFormat.json)


def hostile(execution_id: str = "acme/j1@2026-12-01T08:00:00.000Z") -> ExecutionRequested:
    return execution().model_copy(
        update={"execution_id": execution_id, "target": JSON, "payload": CONTROL}
    )


def test_the_claimed_path_fails_the_run_for_good_and_produces_nothing() -> None:
    ex = hostile()
    caller, producer = target(ex)
    assert caller.start(ex, Stop(), CODEC.encode(ex)) is None  # the blocking call says why
    result = caller.forward(ex, Stop(), 0.0, CODEC.encode(ex))
    assert (result.status, result.retryable) == (OutcomeStatus.failed, False)
    assert result.error is not None and result.error.type == TOO_LARGE
    assert str(RECORD_LIMIT) in result.error.message and "orders" in result.error.message
    assert producer.sent == []
    with pytest.raises(RecordTooLargeError):
        caller.delivery(ex, CODEC.encode(ex))
    fine = ex.model_copy(update={"payload": b"p" * MAX_PAYLOAD_BYTES})
    assert caller.forward(fine, Stop(), 0.0, CODEC.encode(fine)).status is OutcomeStatus.succeeded
    caller._closed.set()


CODEC = Codec()


@pytest.mark.parametrize("exactly_once", [True, False])
def test_the_worker_reports_it_failed_for_good_and_delivers_the_next_run(
    driver: Driver, exactly_once: bool
) -> None:
    settings = KadenceSettings(
        namespace="drv", partitions=1, worker_kafka_exactly_once=exactly_once
    )
    topics = driver.provision(settings)
    kafka, producer = offline_kafka(settings)
    bad = hostile()
    good = execution().model_copy(
        update={"execution_id": "acme/j1@2026-12-01T08:01:00.000Z", "target": JSON}
    )
    topic = driver.create_topic(kafka.topic_for(bad))
    kafka._known.add(topic)
    worker = driver.worker(settings, {"kafka": kafka})
    driver.send(topics.executions, bad, key=bad.routing_key, partition=0)
    driver.send(topics.executions, good, key=good.routing_key, partition=0)

    def outcomes() -> dict[str, ExecutionOutcome]:
        found = driver.records(topics.outcomes, OUTCOMES)
        return {o.execution_id: o for o in found if isinstance(o, ExecutionOutcome)}

    driver.turn_until(lambda: len(outcomes()) == 2, worker)
    failed, ok = outcomes()[bad.execution_id], outcomes()[good.execution_id]
    assert (failed.status, failed.retryable) == (OutcomeStatus.failed, False)
    assert failed.error is not None and failed.error.type == TOO_LARGE
    assert "over the" in failed.error.message and "JSON string" in failed.error.message
    assert ok.status is OutcomeStatus.succeeded
    sent = [m.value() for m in driver.messages(topic)] + [v for _t, _k, v, _h in producer.sent]
    assert len(sent) == 1 and all(len(v or b"") <= RECORD_LIMIT for v in sent)
    kafka._closed.set()
