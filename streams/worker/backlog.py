"""The worker's inbox stays bounded whatever the backlog: past its bound the backlog waits in
Kafka, and a tenant whose runs cannot start does not fill the inbox for the others.

A worker reads executions long before they are due (the scheduler dispatches ahead) and holds
each one (its bytes and its decoded copy) until it is claimed. Two rules bound that memory:

- A tenant at its running cap (`Fairness.cap`: its runs hang, say) holds at most twice its cap
  (`Inbox.quota`; enough to refill its slots at once). Its executions read past that are let
  go: not held, not claimed, but owed (streams/worker/owed.py). The offset commit never passes
  an owed one and its metadata names them with the held ones (so a worker that dies leaves
  them to the next owner of the partition). The partition goes on being read, so the other
  tenants on it are read and start on time.
- The inbox holds at most `worker_inbox_max_executions` executions and
  `worker_inbox_max_bytes` bytes (counted over the executions held, not claimed; claims ahead
  have their own bound, `worker_claim_ahead_max`). One read past that is owed too, whoever's
  it is, and the worker pauses every partition it owns (`consumer.pause`): the rest waits in
  Kafka, where the consumer lag shows it. Over three quarters of its bound, the inbox lets go
  of the executions of tenants at their cap down to their quota (`Inbox.shed`, at most every
  SHED_INTERVAL_S), so that it is not full of what cannot start; under three quarters, the
  partitions resume.

Owed executions are read again once a tenant owing them on a partition would take them (no
longer at its cap, or down to half its quota) and the inbox has room, at most every
REREAD_INTERVAL_S per partition: the worker seeks the partition back to the first offset it
owes and reads forward; `Inbox.wanted` takes only the offsets owed (the same path as a
take-over's replay), so nothing claimed or held is read twice, and an execution read again is
the same record, with its execution id. Once an execution read again is let go again and no
tenant it was read for wants more, the reading stops (`Inbox.abandon`): the worker seeks back
to where it had read to, and the rest stays owed; so a second reading costs about a quota, not
the whole backlog. A revocation read on a partition owing an earlier
offset is owed too, so the second reading meets it after the execution it revokes.

The lag reported (`kadence_consumer_lag_records`) counts the owed executions with the records
not read yet: both are backlog waiting in Kafka. The backlog an autoscaler reads
(`kadence_worker_backlog_records`, summed over the group) is that lag plus the executions due
and not started that the worker holds (`kadence_worker_due_not_started`, by tenant). Neither
alone will do: the lag stays near 0 while a worker that keeps up with reading holds thousands it
cannot start yet, and the inbox's size (`kadence_worker_inbox`) counts runs read ahead of
their due time, which are not backlog. Records not read yet may be due or not: they count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from confluent_kafka import KafkaException, TopicPartition

from kadence.metrics import LagTracker, Positions
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.worker.inbox import Inbox
from streams.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)
REREAD_INTERVAL_S = 1.0
"""A partition is sought back to what it owes at most this often."""
SHED_INTERVAL_S = 1.0
"""Over three quarters of its bound, the inbox looks for executions to let go this often."""
REPLAY_CHECK_S = 1.0
"""Replays holding executions back are checked for a log that ends before them this often."""
RESUME_AT = 0.75
"""Paused partitions resume (and owed executions are read again) under this share of the
bound."""


class Reader(Positions, Protocol):
    """What the backlog does with the worker's consumer (streams.kafkaio.ports.ConsumerLike)."""

    def pause(self, partitions: list[TopicPartition]) -> None: ...

    def resume(self, partitions: list[TopicPartition]) -> None: ...

    def seek(self, partition: TopicPartition) -> None: ...


class Backlog:
    def __init__(
        self,
        inbox: Inbox,
        settings: KadenceSettings,
        consumer: Reader,
        *,
        metrics: WorkerMetrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inbox = inbox
        self.consumer = consumer
        self.topic = Topics(settings).worker_executions
        inbox.max_count = settings.worker_inbox_max_executions
        inbox.max_size = settings.worker_inbox_max_bytes
        self.monotonic = monotonic
        self.metrics = metrics
        self.paused = False
        self._paused_at = -1
        """`inbox.assignments` when the partitions were paused (a rebalance resumes them)."""
        self._reread_at: dict[int, float] = {}
        self._gauged = self._shed_at = self._ended_at = -1e9
        self.shed = 0
        """Executions let go when the inbox was full, so far."""

    def roomy(self) -> bool:
        inbox = self.inbox
        return inbox.count < inbox.max_count * RESUME_AT and inbox.size < inbox.max_size * RESUME_AT

    def settle(self, lag: LagTracker | None = None, now_ms: int | None = None) -> None:
        """After a turn's reads: let go, pause, resume or read again as the bound says; then
        measure the lag, and (`now_ms` given) the backlog."""
        for p in list(self.inbox.owed.abandoned):  # reading again would let the rest go again
            upto = self.inbox.abandon(p)
            if upto is not None:
                self.consumer.seek(TopicPartition(self.topic, p, upto))
        now = self.monotonic()
        if not self.roomy() and now - self._shed_at >= SHED_INTERVAL_S:
            self._shed_at = now
            shed = self.inbox.shed()
            if shed:
                self.shed += shed
                log.info("inbox full: %d executions of tenants at their cap let go", shed)
        if self.inbox.full():
            if not self.paused or self._paused_at != self.inbox.assignments:
                self._pause()
        elif self.paused and self.roomy():
            self._resume()
        if not self.paused and self.roomy():
            self._reread()
        if now - self._ended_at >= REPLAY_CHECK_S:
            self._ended_at = now
            self._end_replays()
        if lag is not None:
            lag.update(_Unread(self.consumer, self.inbox))
        if self.metrics is not None and now - self._gauged >= 1:
            self._gauged = now
            gauge = self.metrics.inbox
            gauge.labels("executions").set(self.inbox.count)
            gauge.labels("bytes").set(self.inbox.size)
            gauge.labels("owed").set(len(self.inbox.owed))
            if now_ms is not None:
                unread = 0 if lag is None else lag.per_topic.get(self.topic, 0)
                self.metrics.backlog_is(self.inbox.due_by_tenant(now_ms), unread)

    def _pause(self) -> None:
        assigned = self.consumer.assignment()
        if assigned:
            self.consumer.pause(assigned)
        self.paused, self._paused_at = True, self.inbox.assignments
        count, size = self.inbox.count, self.inbox.size
        if self.metrics is not None:
            self.metrics.reading_paused.inc()
        log.info("inbox full (%d executions, %d bytes): reading paused", count, size)

    def _resume(self) -> None:
        assigned = self.consumer.assignment()
        if assigned:
            self.consumer.resume(assigned)
        self.paused = False
        log.info("inbox down to %d executions: reading resumed", self.inbox.count)

    def _end_replays(self) -> None:
        """A replay holding executions back (`Inbox.replaying`) whose partition the consumer
        has read to its end before the replay's read position (a log truncated or emptied by
        retention) would hold them until another record comes: it ends now."""
        replaying = self.inbox.replaying()
        if not replaying:
            return
        try:
            at = self.consumer.position([TopicPartition(self.topic, p) for p, _ in replaying])
            for tp, (p, upto) in zip(at, replaying, strict=True):
                _low, high = self.consumer.get_watermark_offsets(tp, cached=True)
                if 0 <= high <= tp.offset < upto:
                    self.inbox.caught_up(p)
        except (KafkaException, RuntimeError):
            return  # between assignments: the next check sees

    def _reread(self) -> None:
        now = self.monotonic()
        for p in list(self.inbox.owed.runs):
            if now - self._reread_at.get(p, -1e9) < REREAD_INTERVAL_S or not self.inbox.hungry(p):
                continue
            first = self.inbox.reread(p)
            if first is not None:
                self._reread_at[p] = now
                self.consumer.seek(TopicPartition(self.topic, p, first))
                log.debug("executions[%d]: reading again from %d", p, first)


class _Unread:
    """The consumer as the lag tracker reads it: a partition's position less what it owes."""

    def __init__(self, consumer: Reader, inbox: Inbox) -> None:
        self.consumer = consumer
        self.inbox = inbox

    def assignment(self) -> list[TopicPartition]:
        return self.consumer.assignment()

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        out = self.consumer.position(partitions)
        for tp in out:
            if tp.offset >= 0:
                tp.offset -= self.inbox.owed.count(tp.partition)
        return out

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return self.consumer.get_watermark_offsets(partition, timeout, cached)
