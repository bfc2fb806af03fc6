"""The `k2` bitmap of scattered held executions survives the real broker's offset commit: the
broker keeps offset metadata up to `offset.metadata.max.bytes` (4 096 by default), and what a
partition's next owner reads back names exactly the executions held (streams/worker/offsets.py)."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, TopicPartition

from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.worker.offsets import METADATA_LIMIT, decode_metadata, encode_metadata


def test_a_bitmap_commit_reads_back_as_the_held_executions(settings: KadenceSettings) -> None:
    held = list(range(1_000, 13_000, 3))  # 4 000 runs: no `k1` list fits
    upto = 13_500
    meta = encode_metadata(held, upto)
    assert meta.startswith("k2:") and len(meta) <= METADATA_LIMIT
    topic = Topics(settings).executions
    consumer = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": f"{settings.namespace}.bitmap-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, held[0], metadata=meta)], asynchronous=False
        )
        [back] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    finally:
        consumer.close()
    assert (back.offset, back.metadata) == (held[0], meta)
    assert decode_metadata(back.offset, back.metadata) == (upto, frozenset(held))
