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

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from kadence.clock import Clock, SystemClock
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.models import DeadLetter, ExecutionOutcome, HistoryRecord, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.views import apply
from streams.views.store import ViewStore, offset_key

log = logging.getLogger(__name__)
RETENTION_SWEEP_S = 3_600.0


@dataclass
class Materializer:
    settings: KadenceSettings
    store: ViewStore
    clock: Clock = field(default_factory=SystemClock)
    codec: Codec = field(default_factory=Codec)
    skipped: int = 0
    applied: int = 0
    caught_up: bool = False
    """Every partition read up to its end as it was when the view started."""
    changed: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _targets: dict[tuple[str, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.topics = Topics(self.settings)
        self.inputs = (
            self.topics.schedules,
            self.topics.history,
            self.topics.outcomes,
            self.topics.dead_letter,
        )
        self.consumer = Consumer(
            {
                **self.settings.kafka_common(),
                "group.id": f"{self.settings.namespace}.views",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )

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

    def run(self) -> None:
        assignment = []
        meta = self.consumer.list_topics(timeout=30)
        for topic in self.inputs:
            for p in sorted(meta.topics[topic].partitions):
                start = self.store.offset(topic, p)
                assignment.append(
                    TopicPartition(topic, p, OFFSET_BEGINNING if start is None else start)
                )
                _low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, p), 30)
                if high > (start or 0):
                    self._targets[(topic, p)] = high
        self.consumer.assign(assignment)
        self.caught_up = not self._targets
        swept = 0.0
        while not self._stop.is_set():
            msgs = self.consumer.consume(500, 0.2)
            if msgs:
                with self.changed:
                    for m in msgs:
                        self._apply(m)
                    self.store.flush()
                    self.changed.notify_all()
            if not self.caught_up:
                self._check_caught_up()
            if time.monotonic() - swept > RETENTION_SWEEP_S:
                self.sweep()
                swept = time.monotonic()
        self.consumer.close()

    def _check_caught_up(self) -> None:
        done = [tp for tp, high in self._targets.items() if (self.store.offset(*tp) or 0) >= high]
        for tp in done:
            del self._targets[tp]
        if not self._targets:
            self.caught_up = True
            log.info("query view caught up (%d records applied)", self.applied)

    def _apply(self, m: Message) -> None:
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
        seq = f"{topic.rsplit('.', 1)[-1][:1]}{partition}:{offset:012d}"
        value = m.value()
        at = self.clock.now_ms()
        try:
            if topic == self.topics.schedules:
                key = (m.key() or b"").decode(errors="replace")
                definition = None
                if value is not None:
                    definition = self.codec.decode_as(value, ScheduleDefinition)
                apply.apply_definition(self.store, key, definition, str(at))
            elif topic == self.topics.history:
                apply.apply_history(self.store, self.codec.decode_as(value, HistoryRecord), seq)
            elif topic == self.topics.outcomes:
                record = self.codec.decode(value)
                if isinstance(record, ExecutionOutcome):
                    apply.apply_outcome(self.store, record, seq)
            else:
                apply.apply_dead_letter(self.store, self.codec.decode_as(value, DeadLetter), seq)
        except DecodeError as exc:
            self.skipped += 1
            log.debug("view skips %s[%d]@%d: %s", topic, partition, offset, exc)
            return
        self.applied += 1

    def sweep(self) -> int:
        """Drop history older than the retention; returns how many events went."""
        cutoff = self.clock.now_ms() - self.settings.history_retention_days * 86_400_000
        dropped = 0
        with self.changed:
            for key in self.store.keys(b"H"):
                at_ms = int(key.split(b"\0")[3])
                if at_ms < cutoff:
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
