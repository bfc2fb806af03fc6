"""Bring a partition's store up to date from its compacted changelog before it processes anything.

From the local store's recorded changelog offset when it has one and the log still holds it;
from the beginning otherwise (store lost, wiped, or older than the log's start).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike
from streams.kafkaio.retry import retrying
from streams.runtime.store import Batch, Store

log = logging.getLogger(__name__)
BATCH = 5000


@dataclass(frozen=True)
class Restored:
    partition: int
    records: int
    seconds: float
    from_scratch: bool


def restore(
    store: Store,
    reopen: Callable[[bool], Store],
    clients: Clients,
    topic: str,
    partition: int,
    *,
    progress: Callable[[int, int], None] = lambda _done, _total: None,
) -> tuple[Store, Restored]:
    """Replay the changelog tail into `store`. `reopen(wipe)` gives a fresh store if needed;
    `progress(done, total)` hears how far the replay is after each batch."""
    started = time.monotonic()
    consumer = clients.consumer(
        f"restore-{uuid.uuid4().hex}",
        f"restore.{topic}.{partition}",
        **{
            "enable.partition.eof": True,
            "queued.max.messages.kbytes": 16_384,  # bounded prefetch: restore is CPU-bound
        },
    )
    try:
        tp = TopicPartition(topic, partition)
        low, high = _watermarks(consumer, tp)
        stored = store.changelog_offset()
        from_scratch = stored is None or stored + 1 < low or stored >= high
        if from_scratch and stored is not None:
            log.warning(
                "store for %s[%d] at offset %d does not fit the log [%d, %d): rebuilding",
                topic,
                partition,
                stored,
                low,
                high,
            )
            store = reopen(True)
        start = low if from_scratch else stored + 1  # type: ignore[operator]
        records = 0
        if start < high:
            consumer.assign([TopicPartition(topic, partition, start)])
            records = _drain(
                consumer, store, tp, high, lambda pos: progress(pos - start, high - start)
            )
        return store, Restored(partition, records, time.monotonic() - started, from_scratch)
    finally:
        consumer.close()


STALL_S = 120.0
"""An open transaction of a crashed owner holds the read_committed position back until the
broker aborts it (transaction.timeout.ms); give up only well after that."""


def _drain(
    consumer: ConsumerLike,
    store: Store,
    tp: TopicPartition,
    high: int,
    progress: Callable[[int], None] = lambda _position: None,
) -> int:
    records = 0
    last_progress = time.monotonic()
    last_position = -1
    while True:
        batch = Batch()
        for msg in consumer.consume(num_messages=BATCH, timeout=0.1):
            if msg.error() is not None:
                continue  # partition EOF and transient errors: the position check decides
            key = msg.key()
            if key is None:
                continue
            batch.put(key, msg.value())
            batch.changelog_offset = msg.offset()
            records += 1
        if batch:
            store.apply(batch)
        position = consumer.position([tp])[0].offset
        progress(position)
        if position != last_position:
            last_position, last_progress = position, time.monotonic()
        elif time.monotonic() - last_progress > STALL_S:
            raise RuntimeError(f"restore of {tp.topic}[{tp.partition}] stalled at {position}")
        if position >= high:
            if store.changelog_offset() is None or (store.changelog_offset() or 0) < high - 1:
                # transaction markers sit after the last record: remember we have read to high
                marker = Batch(changelog_offset=high - 1)
                store.apply(marker)
            return records


def _watermarks(consumer: ConsumerLike, tp: TopicPartition) -> tuple[int, int]:
    """The changelog partition's offsets, waiting out a leader election (a fresh topic, a
    restarted broker)."""
    low, high = retrying(
        lambda: consumer.get_watermark_offsets(tp, timeout=30),
        f"watermarks of {tp.topic}[{tp.partition}]",
    )
    return int(low), int(high)
