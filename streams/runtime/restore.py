"""Bring partitions' stores up to date from their compacted changelog before they process anything.

From the local store's recorded changelog offset when it has one and the log still holds it;
from the beginning otherwise (store lost, wiped, or older than the log's start). A rebuild from
the beginning writes values without reading anything back, and indexes their due times once at
the end (`Store.rebuild`, `Store.rebuilt`). The partitions assigned
together are restored together, by one consumer: their fetches overlap, and the fixed cost of a
consumer (metadata, first fetch, end of log) is paid once, not once per partition.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import TopicPartition

from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike, MessageLike
from streams.kafkaio.retry import retrying
from streams.runtime.store import Batch, Store

log = logging.getLogger(__name__)
BATCH = 5000
LOG_EVERY_S = 5.0
"""A restore in progress says how far it is this often."""

STALL_S = 120.0
"""An open transaction of a crashed owner holds the read_committed position back until the
broker aborts it (transaction.timeout.ms); give up only well after that."""


@dataclass(frozen=True)
class Restored:
    partition: int
    records: int
    seconds: float
    from_scratch: bool


@dataclass
class _Replay:
    """One partition's restore: where it starts, where it ends, what it has applied."""

    store: Store
    start: int
    high: int
    from_scratch: bool
    records: int = 0
    position: int = -1
    applied: int = -1
    """The offset of the last record written."""

    def write(self, batch: Batch) -> None:
        if batch.changelog_offset is not None:
            self.applied = max(self.applied, batch.changelog_offset)
        if self.from_scratch:
            self.store.rebuild(batch)
        else:
            self.store.apply(batch)

    def finish(self) -> None:
        """Record how far the store is (a rebuild: index it first). Transaction markers sit
        after the last record: the offset is at least the high watermark's predecessor."""
        offset = max(self.applied, self.high - 1)
        if self.from_scratch:
            self.store.rebuilt(offset if offset >= 0 else None)
        elif offset >= 0 and (self.store.changelog_offset() or -1) < offset:
            self.store.apply(Batch(changelog_offset=offset))


def restore(
    store: Store,
    reopen: Callable[[bool], Store],
    clients: Clients,
    topic: str,
    partition: int,
    *,
    progress: Callable[[int, int], None] = lambda _done, _total: None,
) -> tuple[Store, Restored]:
    """One partition: `restore_all` of it alone."""
    done = restore_all(
        {partition: store},
        lambda _p, wipe: reopen(wipe),
        clients,
        topic,
        progress=lambda _p, d, t: progress(d, t),
    )
    return done[partition]


def restore_all(
    stores: Mapping[int, Store],
    reopen: Callable[[int, bool], Store],
    clients: Clients,
    topic: str,
    *,
    progress: Callable[[int, int, int], None] = lambda _p, _done, _total: None,
) -> dict[int, tuple[Store, Restored]]:
    """Replay each partition's changelog tail into its store. `reopen(partition, wipe)` gives a
    fresh store if needed; `progress(partition, done, total)` hears how far each replay is."""
    started = time.monotonic()
    consumer = clients.consumer(
        f"restore-{uuid.uuid4().hex}",
        f"restore.{topic}",
        **{
            "enable.partition.eof": True,
            "queued.max.messages.kbytes": 16_384,  # bounded prefetch: restore is CPU-bound
            # librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever the prefetch
            # is full, which a restore that writes slower than it reads hits every few MB
            "fetch.queue.backoff.ms": 10,
            "fetch.wait.max.ms": 50,  # the end of the log is noticed in 50 ms, not 500
        },
    )
    try:
        replays = {p: _plan(consumer, topic, p, s, reopen) for p, s in sorted(stores.items())}
        pending = {p: r for p, r in replays.items() if r.start < r.high}
        if pending:
            consumer.assign([TopicPartition(topic, p, r.start) for p, r in pending.items()])
            _drain(consumer, topic, pending, progress)
        for r in replays.values():
            r.finish()
        seconds = time.monotonic() - started
        return {
            p: (r.store, Restored(p, r.records, seconds, r.from_scratch))
            for p, r in replays.items()
        }
    finally:
        consumer.close()


def _plan(
    consumer: ConsumerLike,
    topic: str,
    partition: int,
    store: Store,
    reopen: Callable[[int, bool], Store],
) -> _Replay:
    low, high = _watermarks(consumer, TopicPartition(topic, partition))
    stored = store.changelog_offset()
    if stored is not None and low <= stored + 1 <= high:
        return _Replay(store, stored + 1, high, from_scratch=False)
    if stored is not None:
        log.warning(
            "store for %s[%d] at offset %d does not fit the log [%d, %d): rebuilding",
            topic,
            partition,
            stored,
            low,
            high,
        )
    if stored is not None or not store.is_empty():
        store.close()  # its directory goes, and RocksDB's lock on it with the open handle
        store = reopen(partition, True)
    return _Replay(store, low, high, from_scratch=True)


def _drain(
    consumer: ConsumerLike,
    topic: str,
    pending: dict[int, _Replay],
    progress: Callable[[int, int, int], None],
) -> None:
    """Apply every pending partition's records up to its high watermark."""
    total = sum(r.high - r.start for r in pending.values())
    last_log = last_move = time.monotonic()
    moved_to = -1
    while pending:
        msgs = consumer.consume(num_messages=BATCH, timeout=0.1)
        batches, counts = batches_of(msgs, pending)  # EOF, errors: the position check decides
        for p, batch in batches.items():
            pending[p].records += counts[p]
            pending[p].write(batch)
        tps = [TopicPartition(topic, p) for p in pending]
        for tp in consumer.position(tps):
            r = pending[tp.partition]
            r.position = max(r.position, tp.offset)
            progress(tp.partition, max(0, r.position - r.start), r.high - r.start)
            if r.position >= r.high:
                del pending[tp.partition]
        now = time.monotonic()
        done = total - sum(r.high - max(r.start, r.position) for r in pending.values())
        if done != moved_to:
            moved_to, last_move = done, now
        elif now - last_move > STALL_S:
            stuck = {p: r.position for p, r in pending.items()}
            raise RuntimeError(f"restore of {topic} stalled at {stuck}")
        if pending and now - last_log >= LOG_EVERY_S:
            last_log = now
            log.info(
                "restoring %s: %d of %d changelog records, %d partitions to go",
                topic,
                done,
                total,
                len(pending),
            )


def batches_of(
    msgs: Sequence[MessageLike], partitions: Container[int]
) -> tuple[dict[int, Batch], dict[int, int]]:
    """Changelog records of `partitions` as one batch per partition (a key's last value, the
    last offset), and the records each had; errors and keyless records are skipped."""
    batches: dict[int, Batch] = {}
    counts: dict[int, int] = {}
    for msg in msgs:
        if msg.error() is not None:
            continue
        key, p = msg.key(), msg.partition() or 0
        if key is None or p not in partitions:
            continue
        batch = batches.get(p)
        if batch is None:
            batch = batches[p] = Batch()
        batch.values[key] = msg.value()
        batch.changelog_offset = msg.offset()
        counts[p] = counts.get(p, 0) + 1
    return batches, counts


def _watermarks(consumer: ConsumerLike, tp: TopicPartition) -> tuple[int, int]:
    """The changelog partition's offsets, waiting out a leader election (a fresh topic, a
    restarted broker)."""
    low, high = retrying(
        lambda: consumer.get_watermark_offsets(tp, timeout=30),
        f"watermarks of {tp.topic}[{tp.partition}]",
    )
    return int(low), int(high)
