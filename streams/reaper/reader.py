"""Reading executions back by reference: the reaper redelivers a run whose lease expired from
the record the worker claimed, at (executions partition, offset).

`ExecutionReader` is the port; `ConsumerReader` implements it on any `Clients` (a real
cluster, or the test driver's in-memory one) with a plain consumer that joins no group.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Protocol

from confluent_kafka import KafkaException, TopicPartition

from streams.kafkaio.ports import ConsumerLike

log = logging.getLogger(__name__)

Ref = tuple[int, int]


class ExecutionReader(Protocol):
    def read(self, refs: Sequence[Ref]) -> dict[Ref, bytes | None]:
        """The committed record value at each (partition, offset); None for one that is not
        there (deleted by retention, aborted). A ref the reader could not tell about (its
        partition unreachable, the read timed out before reaching it, an offset not below the
        high watermark) is left out: the caller asks again later."""
        ...


class ConsumerReader:
    """Reads `topic` by offset with one consumer, built on first use: per partition it seeks
    to the first wanted offset and reads forward (read_committed) up to the last one, or
    until `timeout_s` runs out."""

    def __init__(
        self, consumer: Callable[[], ConsumerLike], topic: str, timeout_s: float = 5.0
    ) -> None:
        self._make = consumer
        self._consumer: ConsumerLike | None = None
        self.topic = topic
        self.timeout_s = timeout_s

    def read(self, refs: Sequence[Ref]) -> dict[Ref, bytes | None]:
        found: dict[Ref, bytes | None] = {}
        wanted: dict[int, set[int]] = defaultdict(set)
        for p, o in refs:
            wanted[p].add(o)
        for p, offsets in sorted(wanted.items()):
            try:
                for o, value in self._partition(p, offsets).items():
                    found[(p, o)] = value
            except KafkaException as exc:  # a leader down or moving: not an answer
                log.warning("could not read %s[%d] (asked again later): %s", self.topic, p, exc)
        return found

    def _partition(self, partition: int, offsets: set[int]) -> dict[int, bytes | None]:
        if self._consumer is None:
            self._consumer = self._make()
        consumer = self._consumer
        first, last = min(offsets), max(offsets)
        _low, high = consumer.get_watermark_offsets(
            TopicPartition(self.topic, partition), timeout=self.timeout_s
        )
        last = min(last, high - 1)
        out: dict[int, bytes | None] = {}
        consumer.assign([TopicPartition(self.topic, partition, first)])
        deadline = time.monotonic() + self.timeout_s
        position = first
        while position <= last and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.1):
                if msg.error() is not None or msg.partition() != partition:
                    continue
                offset = msg.offset() or 0
                position = max(position, offset + 1)
                if offset in offsets:
                    out[offset] = msg.value()
            [at] = consumer.position([TopicPartition(self.topic, partition)])
            position = max(position, at.offset)
        for o in offsets:  # read past without it: aborted, compacted or deleted by retention
            if o not in out and o < position:
                out[o] = None
        # at or past the high watermark: no answer yet (a worker only lists offsets it read, and
        # a new leader's high watermark can trail the old one's for a moment)
        if position <= last:
            log.warning(
                "%s[%d]: offsets up to %d not read within %.1f s (asked again later)",
                self.topic,
                partition,
                last,
                self.timeout_s,
            )
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
