"""What a tenant reads on its Kafka-target topic from real worker processes (issue 43, item 7):
each record says the guarantee it went out under in `kadence-guarantee` (`exactly-once` from
the worker's transaction; `at-least-once` on the claimed path, forced here as the driver tests
force it, `KADENCE_WORKER_KAFKA_EXACTLY_ONCE=false`), a JSON-format record has the fields
docs/kafka.md's sample shows, and its deduplication recipe takes the record as consumed."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kadence.client import KadenceClient
from kadence.headers import GUARANTEE, header_value
from kadence.models import DeliveryFormat, KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import target_topic
from testkit.stack import Stack, execution_settings, until
from testkit.topic_reader import read_topic
from tests.connectors.test_kafka_guide import block, doc_sample, same_fields

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.parametrize(
    ("exactly_once", "said"), [(True, "exactly-once"), (False, "at-least-once")]
)
def test_the_tenant_sees_which_guarantee_each_record_went_out_under(
    settings: KadenceSettings, tmp_path: Path, exactly_once: bool, said: str
) -> None:
    xs = execution_settings(settings, worker_kafka_exactly_once=exactly_once)
    job = ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": "to-kafka",
            "version": 1,
            "schedule": {"kind": "once", "run_at": datetime.now(UTC) + timedelta(seconds=4)},
            "target": KafkaTarget(topic="orders", format=DeliveryFormat.json),
            "payload": {"order": 42},
            "lease_ttl_ms": 3_000,
        }
    )
    topic = target_topic(xs.namespace, "acme", "orders")
    stack = Stack.start(xs, tmp_path)
    try:
        with KadenceClient(xs) as client:
            client.put_many([job])
        [record] = until(lambda: read_topic(xs.bootstrap_servers, topic, 1, 5), 60, "the record")
    finally:
        stack.stop()
    assert header_value(record.headers(), GUARANTEE) == said
    written = json.loads(record.value() or b"")
    same_fields(written, doc_sample())
    assert json.loads(written["payload"]) == {"order": 42}
    recipe: dict[str, Any] = {}
    exec(block("dedup-recipe"), recipe)  # the guide's recipe, on the record as consumed
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE handled (execution_id TEXT PRIMARY KEY)")
    once = [recipe["handle_once"](db, record.headers(), record.value(), noop) for _ in "ab"]
    assert once == [True, False]


def noop(db: sqlite3.Connection, value: bytes) -> None:
    pass


def test_confluent_kafka_consumers_read_committed_unless_told_otherwise(
    settings: KadenceSettings,
) -> None:
    """What docs/kafka.md says of librdkafka's default: an aborted record is not seen."""
    topic = f"{settings.namespace}.to.acme.isolation"
    producer = Producer(
        {"bootstrap.servers": settings.bootstrap_servers, "transactional.id": topic}
    )
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer.init_transactions(30)
    for value, commit in ((b"aborted", False), (b"committed", True)):
        producer.begin_transaction()
        producer.produce(topic, value=value)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    seen = {
        "read_uncommitted": values(
            settings.bootstrap_servers, topic, {"isolation.level": "read_uncommitted"}
        ),
        "the default": values(settings.bootstrap_servers, topic, {}),
    }
    assert seen == {"read_uncommitted": [b"aborted", b"committed"], "the default": [b"committed"]}


def values(bootstrap: str, topic: str, extra: dict[str, str]) -> list[bytes | None]:
    """The values of `topic` (one partition) up to its end, read with `extra` settings."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}.reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **extra,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is not None and err.code() == KafkaError._PARTITION_EOF:
                return out
            if err is None:
                out.append(m.value())
        raise TimeoutError(f"{topic}: no end reached")
    finally:
        consumer.close()
