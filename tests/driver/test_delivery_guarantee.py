"""A tenant's Kafka-target record says which guarantee it went out under (issue 43, item 7):
`kadence-guarantee: exactly-once` when the worker wrote it in its own transaction, and
`at-least-once` when the run took the claimed path, where a duplicate with the same execution
id may follow. The real target, on the in-memory cluster: both paths, no broker."""

from __future__ import annotations

from datetime import timedelta

import pytest

from connectors.kafka_topic import KafkaTopicCaller
from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.headers import GUARANTEE, header_value
from kadence.models import ExecutionRequested, KafkaTarget
from kadence.settings import KadenceSettings
from testkit.driver import START_MS, Driver
from tests.connectors.test_kafka_topic_forward import Producer


def execution() -> ExecutionRequested:
    due = ms_to_datetime(START_MS)
    return ExecutionRequested(
        execution_id="acme/j1@2026-12-01T08:00:00.000Z",
        tenant="acme",
        job_id="j1",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic="orders"),
        timeout_ms=600_000,
        lease_ttl_ms=3_000,
    )


def offline_kafka(settings: KadenceSettings) -> tuple[KafkaTopicCaller, Producer]:
    """The real Kafka target for the in-memory cluster: it never connects (its transactional
    path writes through the worker's session), and the claimed path's own producer records
    what it sent."""
    kafka = KafkaTopicCaller("127.0.0.1:9", settings.namespace, 1, Codec())
    producer = Producer()
    kafka.producer = producer  # type: ignore[assignment]
    return kafka, producer


@pytest.mark.parametrize(
    ("exactly_once", "said"), [(True, "exactly-once"), (False, "at-least-once")]
)
def test_the_record_says_whether_it_went_out_exactly_once(
    driver: Driver, exactly_once: bool, said: str
) -> None:
    settings = KadenceSettings(
        namespace="drv", partitions=1, worker_kafka_exactly_once=exactly_once
    )
    topics = driver.provision(settings)
    kafka, producer = offline_kafka(settings)
    ex = execution()
    topic = driver.create_topic(kafka.topic_for(ex))
    kafka._known.add(topic)
    worker = driver.worker(settings, {"kafka": kafka})
    driver.send(topics.executions, ex, key=ex.routing_key, partition=0)
    in_txn = driver.messages
    driver.turn_until(lambda: bool(in_txn(topic)) or bool(producer.sent), worker)
    headers = [m.headers() for m in in_txn(topic)] + [h for *_, h in producer.sent]
    assert [header_value(h, GUARANTEE) for h in headers] == [said]
    kafka._closed.set()
