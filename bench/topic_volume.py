"""What a benchmark wrote to Kafka, topic by topic: committed records and their bytes (key, value
and headers) in every topic of the namespace, the tenants' target topics included.

Read with `read_committed` from the beginning to the end offsets once nothing grew for 5 s:
records of aborted transactions and the transactions' markers are not counted (a JMX counter of
the broker counts both). Compacted topics may have lost records to compaction by then (the
changelogs: their counts are a floor); a 3-minute run's segments are not rolled, so in practice
nothing is compacted yet.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from kadence.settings import KadenceSettings

BATCH = 10_000
QUIET_S = 5
"""Counted once no topic has grown for this long: what the processes still had to write (the
scheduler settling the last outcomes, the changelogs of the last commits) is in."""


def volume(settings: KadenceSettings, timeout_s: float = 120) -> dict[str, tuple[int, int]]:
    """topic (without the namespace) -> (records, bytes), for every topic of the namespace."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": f"bench-volume-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        prefix = settings.namespace + "."
        ends = _ends(consumer, prefix)
        quiet_since = started = time.monotonic()
        while time.monotonic() - quiet_since < QUIET_S:  # the processes are still catching up
            if time.monotonic() - started > timeout_s / 2:
                break
            time.sleep(1)
            now = _ends(consumer, prefix)
            if now != ends:
                ends, quiet_since = now, time.monotonic()
        consumer.assign([TopicPartition(t, p, 0) for t, p in ends])
        records: Counter[str] = Counter()
        size: Counter[str] = Counter()
        left = dict(ends)
        deadline = time.monotonic() + timeout_s
        while left and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=BATCH, timeout=1.0):
                if m.error() is not None:
                    continue
                topic, partition, offset = m.topic(), m.partition(), m.offset()
                assert topic is not None
                assert partition is not None
                assert offset is not None
                name = topic[len(prefix) :]
                records[name] += 1
                size[name] += _bytes(m)
                if offset + 1 >= left.get((topic, partition), 0):
                    left.pop((topic, partition), None)
            for (topic, p), end in list(left.items()):
                position = consumer.position([TopicPartition(topic, p)])[0].offset
                if position >= end:  # only markers were left
                    left.pop((topic, p))
        return {t: (records[t], size[t]) for t in sorted(records)}
    finally:
        consumer.close()


def _ends(consumer: Consumer, prefix: str) -> dict[tuple[str, int], int]:
    """The end offset of every partition of the namespace's topics that has records."""
    ends: dict[tuple[str, int], int] = {}
    for topic, info in consumer.list_topics(timeout=30).topics.items():
        if not topic.startswith(prefix):
            continue
        for p in info.partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high > 0:
                ends[(topic, p)] = high
    return ends


def per_execution(counts: dict[str, tuple[int, int]], executions: int) -> dict[str, Any]:
    """Records and bytes per execution, by topic (tenant topics together) and in all."""
    by: dict[str, list[int]] = {}
    for topic, (n, b) in counts.items():
        name = "to.<tenant>.<topic>" if topic.startswith("to.") else topic
        acc = by.setdefault(name, [0, 0])
        acc[0] += n
        acc[1] += b
    total_n = sum(n for n, _ in by.values())
    total_b = sum(b for _, b in by.values())
    out: dict[str, Any] = {
        name: {"records": round(n / executions, 3), "bytes": round(b / executions)}
        for name, (n, b) in sorted(by.items())
    }
    out["all"] = {
        "records": round(total_n / executions, 3),
        "bytes": round(total_b / executions),
    }
    return out


def _bytes(m: Any) -> int:
    headers = m.headers() or []
    return (
        len(m.key() or b"")
        + len(m.value() or b"")
        + sum(len(k) + len(v or b"") for k, v in headers)
    )
