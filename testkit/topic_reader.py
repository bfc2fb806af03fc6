"""Reading topics back in tests: every record of a topic from the beginning, in order."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Message, TopicPartition


def read_topic(
    bootstrap: str,
    topic: str,
    expect: int,
    timeout_s: float = 20.0,
    isolation: str = "read_committed",
) -> list[Message]:
    """Read `topic` from offset 0 until `expect` records arrived or `timeout_s` passed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expect and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is None:
                    out.append(msg)
        return out
    finally:
        consumer.close()
