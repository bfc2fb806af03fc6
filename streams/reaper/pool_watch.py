"""The pool watch: which worker pools have a live worker, and which runs wait for one.

Every `interval_s` the reaper process asks the cluster, per pool (KADENCE_POOLS and
`default`), how many members the pool's worker group has and how many records of the pool's
executions topic it has not committed (its backlog); both become gauges
(`kadence_pool_workers`, `kadence_pool_backlog_records`, alert `KadencePoolWithoutWorkers`).
While a pool has no member, the runs waiting on its topic (up to MAX_REPORTED per scan) get a
`waiting_for_pool` history record, once per execution and delivery for as long as this process
watches: they are not lost, they run when a worker of the pool joins. Several reapers each
report (history is a log of decisions; a duplicate says the same thing again). The group's
members and committed offsets are asked from a child process (`group_queries`): librdkafka's
admin path for them can abort the process it runs in while the broker restarts."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from confluent_kafka import KafkaException, TopicPartition
from prometheus_client import CollectorRegistry, Gauge

from kadence.batches import executions_in
from kadence.clock import Clock, ms_to_datetime
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.headers import headers_for
from kadence.models import Decision, ExecutionRequested, HistoryRecord
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import EXECUTIONS, Topics, workers_group
from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike, ProducerLike
from streams.reaper.group_queries import (
    GroupQueries,
    GroupQueryError,
    GroupQuestion,
    kafka_answer,
)

log = logging.getLogger(__name__)

MAX_REPORTED = 1_000
"""Waiting runs one scan reports at most per pool; the next scans report the rest."""
REMEMBERED = 100_000
"""(execution id, delivery) pairs remembered as reported; forgotten all at once past it."""


def newly_waiting(
    pool: str, members: int, runs: Iterable[ExecutionRequested], seen: set[str], now_ms: int
) -> list[HistoryRecord]:
    """The `waiting_for_pool` records for `runs` on `pool`'s topic not reported yet (`seen`,
    updated); none while the pool has a member: its runs are being taken."""
    if members > 0:
        return []
    out = []
    for ex in runs:
        mark = f"{ex.execution_id}#{ex.delivery}"
        if mark in seen:
            continue
        seen.add(mark)
        out.append(
            HistoryRecord(
                tenant=ex.tenant,
                job_id=ex.job_id,
                decision=Decision.waiting_for_pool,
                at=ms_to_datetime(now_ms),
                execution_id=ex.execution_id,
                reason=f"no worker of pool {pool} is running: the run waits on its topic and "
                "runs when one starts (KADENCE_WORKER_POOL)",
                details={"pool": pool},
            )
        )
    return out


class PoolMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.workers = Gauge(
            "kadence_pool_workers",
            "Members of each worker pool's consumer group (0: no worker serves it)",
            ["pool"],
            registry=registry,
        )
        self.backlog = Gauge(
            "kadence_pool_backlog_records",
            "Records of each pool's executions topic its workers have not committed",
            ["pool"],
            registry=registry,
        )


class PoolWatch:
    """Scans every pool each `interval_s` on its own thread (`start`), until `stop`."""

    def __init__(
        self,
        settings: KadenceSettings,
        clients: Clients,
        clock: Clock,
        registry: CollectorRegistry,
        interval_s: float = 5.0,
    ) -> None:
        self.settings = settings
        self.topics = Topics(settings)
        self.clients = clients
        self.clock = clock
        self.metrics = PoolMetrics(registry)
        self.interval_s = interval_s
        self.codec = Codec()
        self.queries = GroupQueries(dict(settings.kafka_common()), kafka_answer)
        self.seen: dict[str, set[str]] = {}
        self._consumer: ConsumerLike | None = None
        self._producer: ProducerLike | None = None
        self._stop = threading.Event()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="pool-watch", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        self.queries.close()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.scan()
            except (GroupQueryError, KafkaException) as exc:  # the broker is away: said briefly
                log.warning("pool watch: %s (tried again in %.0f s)", exc, self.interval_s)
            except Exception:  # the watch reports; it must never stop the reaper
                log.exception("pool watch scan failed (tried again in %.0f s)", self.interval_s)

    def scan(self) -> list[HistoryRecord]:
        """One look at every pool: the gauges, and the history records written."""
        written: list[HistoryRecord] = []
        for pool, topic in self.topics.pool_executions.items():
            group = workers_group(self.settings.namespace, pool)
            answer = self.queries.ask(
                GroupQuestion(group, topic, self.settings.execution_partitions)
            )
            members = answer.members
            spans = self._spans(topic, answer.committed)
            self.metrics.workers.labels(pool).set(members)
            self.metrics.backlog.labels(pool).set(sum(high - at for _, at, high in spans))
            seen = self.seen.setdefault(pool, set())
            if members:
                seen.clear()
                continue
            if len(seen) > REMEMBERED:
                seen.clear()
            runs = self._read(topic, spans)
            written += newly_waiting(pool, members, runs, seen, self.clock.now_ms())
        self._write(written)
        return written

    def _consumer_of(self) -> ConsumerLike:
        if self._consumer is None:
            ns = self.settings.namespace
            self._consumer = self.clients.consumer(f"{ns}.reaper.reader", f"{ns}.pool-watch")
        return self._consumer

    def _spans(self, topic: str, committed: dict[int, int]) -> list[tuple[int, int, int]]:
        """(partition, first uncommitted offset, high watermark) of `topic` for a group that
        has `committed` these offsets."""
        consumer = self._consumer_of()
        parts = [TopicPartition(topic, p) for p in range(self.settings.execution_partitions)]
        spans = []
        for tp in parts:
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            at = max(committed.get(tp.partition, -1), low)
            spans.append((tp.partition, at, high))
        return spans

    def _read(self, topic: str, spans: list[tuple[int, int, int]]) -> list[ExecutionRequested]:
        """Up to MAX_REPORTED waiting runs from the spans (revocations and bad bytes skipped)."""
        consumer = self._consumer_of()
        out: list[ExecutionRequested] = []
        for partition, at, high in spans:
            if at >= high or len(out) >= MAX_REPORTED:
                continue
            consumer.assign([TopicPartition(topic, partition, at)])
            position = at
            while position < high and len(out) < MAX_REPORTED:
                msgs = consumer.consume(num_messages=500, timeout=1.0)
                if not msgs:
                    break
                for msg in msgs:
                    if msg.error() is not None:
                        continue
                    position = max(position, (msg.offset() or 0) + 1)
                    try:
                        record = EXECUTIONS.decode(self.codec, msg.value())
                    except DecodeError:  # not ours to judge here: the worker rejects it
                        continue
                    out += executions_in(self.codec, record)
        return out[:MAX_REPORTED]

    def _write(self, records: list[HistoryRecord]) -> None:
        if not records:
            return
        if self._producer is None:
            self._producer = self.clients.producer(f"{self.settings.namespace}.pool-watch")
        fingerprint = self.codec.schema_fingerprint(HistoryRecord)
        for record in records:
            self._producer.produce(
                self.topics.history,
                value=self.codec.encode(record),
                key=record.key.encode(),
                partition=partition_for(record.key, self.settings.partitions),
                headers=headers_for(record, fingerprint),
            )
        self._producer.flush(10)
