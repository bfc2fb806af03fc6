"""Reading topics back in tests: every record of a topic from the beginning, in order."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

from confluent_kafka import Consumer, Message, TopicPartition


def _reader(bootstrap: str, isolation: str) -> Consumer:
    """A consumer of a group of its own that commits nothing: it reads, and is gone."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
        }
    )


def read_topic(
    bootstrap: str,
    topic: str,
    expect: int,
    timeout_s: float = 20.0,
    isolation: str = "read_committed",
    *,
    weight: Callable[[Message], int] | None = None,
) -> list[Message]:
    """Read `topic` from offset 0 until `expect` records arrived or `timeout_s` passed;
    `weight`: what each record counts for (a batch, the runs it carries), else one."""
    consumer = _reader(bootstrap, isolation)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: list[Message] = []
        counted = 0
        deadline = time.monotonic() + timeout_s
        while counted < expect and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is None:
                    out.append(msg)
                    counted += 1 if weight is None else weight(msg)
        return out
    finally:
        consumer.close()


def read_to_end(
    bootstrap: str, topic: str, timeout_s: float = 60.0, isolation: str = "read_committed"
) -> Iterator[Message]:
    """Every record of `topic` up to where each partition ended when reading began, as it is
    read (a changelog of millions is streamed, not held); raises TimeoutError if that end is
    not reached within `timeout_s`."""
    consumer = _reader(bootstrap, isolation)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > 0:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + timeout_s
        while ends:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{topic}: {sorted(ends)} not read to their end in {timeout_s} s"
                )
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is not None:
                    continue
                p, offset = msg.partition(), msg.offset()
                if p in ends and offset is not None and offset + 1 >= ends[p]:
                    del ends[p]  # the last record (or a transaction marker past it) reached
                yield msg
            for p, position in _positions(consumer, topic, list(ends)):
                if position >= ends[p]:
                    del ends[p]
    finally:
        consumer.close()


def _positions(consumer: Consumer, topic: str, partitions: list[int]) -> list[tuple[int, int]]:
    """Where the consumer is on each partition (commit markers move it past the last record)."""
    if not partitions:
        return []
    got = consumer.position([TopicPartition(topic, p) for p in partitions])
    return [(tp.partition, tp.offset) for tp in got if tp.offset is not None and tp.offset >= 0]
