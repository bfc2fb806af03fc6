"""The query view's input loop: reads `schedules`, `history`, `outcomes` and `dead-letter`
(read_committed, every partition: one view process per deployment), applies each record to
the store, and writes the store and the next offsets in one batch, so a restart resumes where
the last batch ended and applies nothing twice. Undecodable records are counted and skipped:
the processors that own those topics already rejected them with a reason.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from kadence.clock import Clock, SystemClock
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.log_limit import LogLimit
from kadence.metrics import LagTracker
from kadence.models import (
    DeadLetter,
    ExecutionOutcome,
    ExecutionOutcomes,
    HistoryRecord,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.kafkaio.clients import Clients, KafkaClients
from streams.kafkaio.ports import MessageLike
from streams.kafkaio.reading import ready
from streams.kafkaio.retry import retrying
from streams.views import apply, rollup
from streams.views.store import ViewStore, offset_key

log = logging.getLogger(__name__)
RETENTION_SWEEP_S = 3_600.0


@dataclass
class Materializer:
    settings: KadenceSettings
    store: ViewStore
    clock: Clock = field(default_factory=SystemClock)
    codec: Codec = field(default_factory=Codec)
    clients: Clients | None = None
    """Where the consumer comes from; None: the cluster in `settings`."""
    skipped: int = 0
    applied: int = 0
    failed: int = 0
    """Records whose decode passed but applying them raised: what they wrote taken back, logged
    with their offset (once a minute per key at most: `LogLimit`) and skipped, so one bad record
    cannot freeze every read. Shown on `/ready` with `skipped` (undecodable records)."""
    refused: int = 0
    """Definitions the scheduler refuses too (kadence/acceptance.py), so not shown."""
    stopped_by: str | None = None
    """Why the input loop ended on its own (it should never): the view is then not ready."""
    caught_up: bool = False
    """Every partition read up to its end as it was when the view started."""
    changed: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _limit: LogLimit = field(default_factory=LogLimit)
    _targets: dict[tuple[str, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.topics = Topics(self.settings)
        self._schedule_partitions = self.settings.partitions
        """How many partitions `schedules` has (read from the cluster at start)."""
        self.inputs = (
            self.topics.schedules,
            self.topics.history,
            self.topics.outcomes,
            self.topics.dead_letter,
        )
        clients = self.clients or KafkaClients(self.settings)
        self.consumer = clients.consumer(
            f"{self.settings.namespace}.views",
            f"{self.settings.namespace}.views.{self.settings.instance_id}",
        )
        self.lag = LagTracker(f"{self.settings.namespace}.views")
        """What is left to read, measured by the input loop (streams/views/metrics.py)."""

    def stop(self) -> None:
        self._stop.set()

    def wait_applied(self, topic: str, partition: int, offset: int, timeout_s: float) -> bool:
        """Block until the record at `offset` is applied (read-your-writes for the API)."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while (self.store.offset(topic, partition) or 0) <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    @property
    def ready(self) -> bool:
        """Caught up, and the input loop still running."""
        return self.caught_up and self.stopped_by is None

    def run(self) -> None:
        """The input loop (on its own thread). Passing broker errors at start are waited out;
        should the loop still end by an error, `stopped_by` says why and `ready` goes false."""
        try:
            self._run()
        except Exception as exc:
            self.stopped_by = f"{type(exc).__name__}: {exc}"
            log.exception("the query view stopped reading its topics")
            raise
        finally:
            self.consumer.close()

    def _partitions(self, topic: str) -> list[int]:
        def listed() -> list[int]:
            info = self.consumer.list_topics(topic, timeout=30).topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                err = info.error if info is not None and info.error is not None else None
                raise KafkaException(err or KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            return sorted(info.partitions)

        return retrying(listed, f"partitions of {topic}")

    def _run(self) -> None:
        self.assign()
        swept = 0.0
        while not self._stop.is_set():
            self.turn()
            if time.monotonic() - swept > RETENTION_SWEEP_S:
                self.sweep()
                swept = time.monotonic()

    def assign(self) -> None:
        """Take every partition of the inputs, each from the offset the store last recorded
        (the beginning when it has none), and note how far `caught_up` has to read."""
        assignment = []
        self._schedule_partitions = len(self._partitions(self.topics.schedules))
        for topic in self.inputs:
            for p in self._partitions(topic):
                start = self.store.offset(topic, p)
                assignment.append(
                    TopicPartition(topic, p, OFFSET_BEGINNING if start is None else start)
                )
                tp = TopicPartition(topic, p)
                _low, high = retrying(
                    lambda tp=tp: self.consumer.get_watermark_offsets(tp, 30),  # type: ignore[misc]
                    f"watermarks of {topic}[{p}]",
                )
                if high > (start or 0):
                    self._targets[(topic, p)] = high
        self.consumer.assign(assignment)
        self.caught_up = not self._targets

    def turn(self, poll_s: float = 0.2) -> None:
        """Read one batch, apply it, and write it with the next offsets in one store batch."""
        msgs = ready(self.consumer, 500, poll_s)
        self.lag.update(self.consumer)
        if msgs:
            with self.changed:
                for m in msgs:
                    self._apply(m)
                self.store.flush()
                self.changed.notify_all()
        if not self.caught_up:
            self._check_caught_up()

    def _check_caught_up(self) -> None:
        """A partition is read once the store's offset or, past records it never hands out (a
        transaction's commit marker ends many a partition), the consumer's position is at the
        end noted at start: else a view restarted on its store would wait for a next record."""
        waiting = [tp for tp, high in self._targets.items() if (self.store.offset(*tp) or 0) < high]
        if waiting:
            at = self.consumer.position([TopicPartition(t, p) for t, p in waiting])
            waiting = [
                tp for tp, pos in zip(waiting, at, strict=True) if pos.offset < self._targets[tp]
            ]
        self._targets = {tp: self._targets[tp] for tp in waiting}
        if not self._targets:
            self.caught_up = True
            log.info("query view caught up (%d records applied)", self.applied)

    def _apply(self, m: MessageLike) -> None:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("view input error: %s", err)
            return
        topic, partition, offset = m.topic(), m.partition(), m.offset()
        assert topic is not None
        assert partition is not None
        assert offset is not None
        self.store.put(offset_key(topic, partition), offset + 1)
        self.store.begin()
        try:
            applied = self._apply_one(m, topic, partition, offset)
        except DecodeError as exc:
            self.store.undo()
            self.skipped += 1
            log.debug("view skips %s[%d]@%d: %s", topic, partition, offset, exc)
        except Exception as exc:  # one record the view cannot show must not freeze every read
            self.store.undo()
            self.failed += 1
            if self._limit.allow((topic, m.key())):
                log.error(
                    "view cannot apply %s[%d]@%d; skipped (%d similar lines held back)",
                    topic,
                    partition,
                    offset,
                    self._limit.take_held_back(),
                    exc_info=exc,
                )
        else:
            self.store.keep()
            self.applied += applied

    def _apply_one(self, m: MessageLike, topic: str, partition: int, offset: int) -> bool:
        """Apply one record to the store (False: a definition the scheduler refuses too, left
        out); it raises for a record it cannot use (`_apply` takes back what it wrote)."""
        seq = f"{topic.rsplit('.', 1)[-1][:1]}{partition}:{offset:012d}"
        value = m.value()
        at = self.clock.now_ms()
        if topic == self.topics.schedules:
            definition = None
            if value is not None:
                definition = self.codec.decode_as(value, ScheduleDefinition)
            refused = apply.apply_definition(
                self.store,
                m.key() or b"",
                definition,
                str(at),
                partition=partition,
                partitions=self._schedule_partitions,
                source=f"{partition}:{offset}",
            )
            if refused is not None:
                self.refused += 1
                log.debug("view leaves out %s[%d]@%d: %s", topic, partition, offset, refused)
                return False
        elif topic == self.topics.history:
            apply.apply_history(self.store, self.codec.decode_as(value, HistoryRecord), seq)
        elif topic == self.topics.outcomes:
            record = self.codec.decode(value)
            if isinstance(record, ExecutionOutcome):
                apply.apply_outcome(self.store, record, seq)
            elif isinstance(record, ExecutionOutcomes):  # a worker's batch: each its own event
                for i, outcome in enumerate(record.outcomes):
                    apply.apply_outcome(self.store, outcome, f"{seq}.{i:04d}")
        else:
            letter = self.codec.decode_as(value, DeadLetter)
            apply.apply_dead_letter(self.store, letter, seq, source=f"{partition}:{offset}")
        return True

    def sweep(self) -> int:
        """Drop history older than the retention, each event folded into its job's roll-up
        for its day first (streams/views/rollup.py), and roll-ups older than theirs; returns
        how many events went."""
        now = self.clock.now_ms()
        cutoff = now - self.settings.history_retention_days * 86_400_000
        dropped = 0
        rolled: dict[bytes, dict[str, Any]] = {}
        with self.changed:
            for key in self.store.keys(b"H"):
                _h, tenant, job_id, at, _seq = key.decode().split("\0", 4)
                at_ms = int(at)
                if at_ms < cutoff:
                    event = self.store.get(key)
                    if event is not None:
                        rk = rollup.rollup_key(tenant, job_id, rollup.day_of(at_ms))
                        doc = rolled.get(rk) or self.store.get(rk)
                        doc = doc or rollup.empty(tenant, job_id, rollup.day_of(at_ms))
                        rolled[rk] = rollup.fold(doc, event)
                    self.store.put(key, None)
                    dropped += 1
            for rk, doc in rolled.items():
                self.store.put(rk, doc)
            oldest = rollup.day_of(now - self.settings.history_rollup_days * 86_400_000)
            for key in list(self.store.keys(b"R")):
                if key.decode().rsplit("\0", 1)[1] < oldest:
                    self.store.put(key, None)
            for key in list(self.store.keys(b"B")):  # backfill progress, as old as its history
                doc = self.store.get(key)
                if doc is not None and doc.get("at_ms", 0) < cutoff:
                    self.store.put(key, None)
                    dropped += 1
            self.store.flush()
        if dropped:
            log.info(
                "retention: dropped %d history events older than %d days",
                dropped,
                self.settings.history_retention_days,
            )
        return dropped
