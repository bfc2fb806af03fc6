"""Issue 29, item 6: a tenant's Kafka-target topic is created with KADENCE_TARGET_TOPIC_PARTITIONS
partitions (default 1), not the executions topic's count: each partition the target writes to
costs a produce request. The worker's wiring (apps.worker.targets), on the real broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from apps.worker import targets
from connectors.kafka_topic import KafkaTopicCaller
from kadence.settings import KadenceSettings
from kadence.topics import target_topic

pytestmark = pytest.mark.kafka


def partitions_of(settings: KadenceSettings, topic: str, wait_s: float = 30) -> int:
    """The topic's partition count once the broker's metadata shows it: a topic just created
    may be listed for a moment with no partitions yet."""
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
    deadline = time.monotonic() + wait_s
    while True:
        found = admin.list_topics(topic, timeout=10).topics[topic]
        if (found.error is None and found.partitions) or time.monotonic() > deadline:
            return len(found.partitions)
        time.sleep(0.1)


@pytest.mark.parametrize("configured", [None, 2])
def test_the_worker_creates_a_target_topic_with_the_configured_partitions(
    settings: KadenceSettings, configured: int | None
) -> None:
    if configured is not None:
        settings = settings.model_copy(update={"target_topic_partitions": configured})
    assert settings.execution_partitions == 3  # what it used to get
    kafka = targets(settings)["kafka"]
    assert isinstance(kafka, KafkaTopicCaller)
    topic = target_topic(settings.namespace, "acme", "orders")
    try:
        kafka._ensure(topic)
        assert partitions_of(settings, topic) == (configured or 1)
    finally:
        kafka.close()
