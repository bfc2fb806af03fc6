"""Standby replicas: warm copies of the changelog partitions this process does not own.

As Kafka Streams' `num.standby.replicas`: besides the partitions it owns, a process keeps a
copy of the others' stores, tailing their changelogs with a consumer of its own (no group, no
offsets committed). When a partition moves here (its owner died, the group rebalanced), its
store is the copy, and the restore reads only what was written since (streams/runtime/
restore.py), not the whole changelog: at 10 M jobs the difference between seconds and minutes
of late jobs.

Placement: a copy of every partition the process does not own (`KADENCE_STANDBY`), so any
survivor takes over warm, whichever the group assigns. With two instances that is one standby
per partition; with N, N - 1 (disk and the changelog's reading N times over).

The runner calls `step` once a turn (a bounded batch, in its own thread: no lock, no second
writer of a store) and `follow` on every assignment: a copy the runner is about to own is
closed first (its store is the runner's to open). A copy still catching up from the log's start
writes values only (`Store.rebuild`); handed over midway, it is completed as far as it got
(`Store.rebuilt`), so the restore goes on from there.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from streams.kafkaio.clients import Clients
from streams.kafkaio.retry import retrying
from streams.runtime.config import RunnerConfig
from streams.runtime.restore import batches_of
from streams.runtime.store import Store

log = logging.getLogger(__name__)
LAG_EVERY_S = 1.0


@dataclass
class _Copy:
    store: Store
    rebuilding: bool
    """Caught up from the log's start yet? Until then, values only (`Store.rebuild`)."""
    applied: int = -1
    """The offset of the last record written to the store (-1: none)."""
    position: int = -1
    """The consumer's position (past transaction markers), as last measured."""

    def complete(self) -> None:
        """End a rebuild as far as it got: index the values, record the offset."""
        if self.rebuilding:
            offset = max(self.applied, self.position - 1)
            self.store.rebuilt(offset if offset >= 0 else None)
            self.rebuilding = False


def standbys_for(
    cfg: RunnerConfig, clients: Clients, open_store: Callable[[int, bool], Store]
) -> Standbys | None:
    """The runner's standbys, if it keeps them (a store on disk, `standby_partitions`)."""
    if cfg.state_dir is None or cfg.standby_partitions <= 0:
        return None
    every = set(range(cfg.standby_partitions))
    return Standbys(clients, cfg.changelog_topic, open_store, cfg.client_id, every=every)


class Standbys:
    def __init__(
        self,
        clients: Clients,
        topic: str,
        open_store: Callable[[int, bool], Store],
        client_id: str,
        *,
        every: set[int],
        max_records: int = 5_000,
    ) -> None:
        self.every = every
        """The changelog's partitions: the runner follows those it does not own."""
        self.topic = topic
        self.open_store = open_store
        self.max_records = max_records
        self.consumer = clients.consumer(
            f"standby-{uuid.uuid4().hex}",
            f"standby.{client_id}",
            **{
                "queued.max.messages.kbytes": 16_384,
                "fetch.queue.backoff.ms": 10,  # see restore.py
            },
        )
        self.copies: dict[int, _Copy] = {}
        self.lag: dict[int, int] = {}
        """partition -> changelog records the copy is behind, as last measured (replaced
        whole: a scrape reads it from another thread)."""
        self._measured = 0.0

    def follow(self, partitions: set[int]) -> None:
        """Keep copies of exactly `partitions`. The others are closed before this returns (the
        runner opens their stores next); new ones start from their store's offset."""
        if set(self.copies) == partitions:
            return
        for p in sorted(set(self.copies) - partitions):
            copy = self.copies.pop(p)
            copy.complete()
            copy.store.close()
        for p in sorted(partitions - set(self.copies)):
            self.copies[p] = self._open(p)
        self.consumer.assign(
            [TopicPartition(self.topic, p, self._start(c)) for p, c in self.copies.items()]
        )
        self.lag = {p: v for p, v in self.lag.items() if p in self.copies}
        self._measured = 0.0
        log.info("standby copies of %s: %s", self.topic, sorted(self.copies) or "none")

    def _open(self, partition: int) -> _Copy:
        store = self.open_store(partition, False)
        offset = store.changelog_offset()
        if offset is not None:
            tp = TopicPartition(self.topic, partition)
            low, high = retrying(  # a leader election, a restarting broker: wait it out
                lambda: self.consumer.get_watermark_offsets(tp, timeout=30),
                f"watermarks of {self.topic}[{partition}]",
            )
            if low <= offset + 1 <= high:
                return _Copy(store, rebuilding=False, applied=offset, position=offset + 1)
        if offset is not None or not store.is_empty():
            store.close()
            store = self.open_store(partition, True)
        return _Copy(store, rebuilding=True)

    @staticmethod
    def _start(copy: _Copy) -> int:
        return copy.applied + 1 if copy.applied >= 0 else OFFSET_BEGINNING

    def step(self) -> int:
        """Apply what the copies' changelogs have (at most `max_records`); the records read."""
        if not self.copies:
            return 0
        msgs = self.consumer.consume(num_messages=self.max_records, timeout=0)
        batches, _counts = batches_of(msgs, self.copies)
        for p, batch in batches.items():
            copy = self.copies[p]
            if copy.rebuilding:
                copy.store.rebuild(batch)
            else:
                copy.store.apply(batch)
            copy.applied = batch.changelog_offset if batch.changelog_offset is not None else -1
        now = time.monotonic()
        if now - self._measured >= LAG_EVERY_S:
            self._measured = now
            self._measure()
        return len(msgs)

    def _measure(self) -> None:
        """Each copy's lag; a rebuild that reached the end of the log is completed."""
        lag: dict[int, int] = {}
        tps = [TopicPartition(self.topic, p) for p in self.copies]
        try:
            positions = self.consumer.position(tps)
        except KafkaException:
            return  # between assignments, or the broker away: the next measure will do
        for tp in positions:
            copy = self.copies[tp.partition]
            copy.position = max(copy.position, tp.offset)
            _low, high = self.consumer.get_watermark_offsets(tp, cached=True)
            if high < 0:
                continue
            lag[tp.partition] = max(0, high - max(copy.position, 0))
            if copy.rebuilding and copy.position >= high:
                copy.complete()
                log.info("standby copy of %s[%d] caught up", self.topic, tp.partition)
        self.lag = lag

    def close(self) -> None:
        for copy in self.copies.values():
            copy.complete()
            copy.store.close()
        self.copies = {}
        self.consumer.close()
