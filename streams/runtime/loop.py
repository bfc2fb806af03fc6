"""The processing loop: consume -> process -> punctuate -> one EOS-v2 transaction -> apply state.

A transaction spans turns: it opens with the first unit of work and commits when it is
`commit_interval_ms` old, when `commit_max_records` inputs and firings went into it, or at the
end of a turn in which a processor asked for it (`commit_soon`: a run due now must not wait). A
turn that did nothing opens nothing. What a transaction produced is visible only at its commit,
so the interval is how long a record may wait to be seen (Kafka Streams under exactly-once
commits every 100 ms too); timers still fire on time, within the open transaction.

Commit order (the whole correctness argument lives in `_commit`):
1. records produced by processing and by timers inside the open transaction, then the changelog:
   one record per key written in the transaction, its last value (a delete is a tombstone);
2. the input positions of the partitions read since the last commit (at least one position
   always) with `consumer_group_metadata()`: a process that lost its partitions in a rebalance
   is fenced here and can commit nothing (KIP-447);
3. the commit: outputs, state changes and input offsets become visible together
   (2 and 3 are `TransactionalSession.commit`, streams/kafkaio/session.py);
4. only then the buffered writes go to RocksDB, with the changelog offset, in one WriteBatch.
A crash before 3 aborts everything and the inputs are read again; a crash between 3 and 4 is
repaired by restore, which replays the changelog from the offset RocksDB last recorded.
A rebalance aborts an open transaction (its work is redone by whoever owns the partition next).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kadence.clock import Clock
from kadence.metrics import LagTracker
from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike, MessageLike
from streams.kafkaio.retry import retrying
from streams.kafkaio.session import Outcome, TransactionalSession
from streams.runtime.context import Headers
from streams.runtime.processor import Processor
from streams.runtime.records import record_of
from streams.runtime.restore import restore
from streams.runtime.store import MemoryStore, RocksStore, Store
from streams.runtime.task import Task

log = logging.getLogger(__name__)


@dataclass
class RunnerConfig:
    app: str
    instance_id: str
    input_topics: list[str]
    changelog_topic: str
    state_dir: Path | None
    """None keeps state in memory (tests); it is still changelogged and restored."""
    session_timeout_ms: int = 10_000
    window_ms: int = 60_000
    max_fires_per_turn: int = 5_000
    max_records_per_turn: int = 2_000
    idle_poll_s: float = 0.02
    commit_interval_ms: int = 100
    """An open transaction commits once it is this old (by the runner's clock): the longest a
    produced record waits to become visible, unless a processor asks to commit sooner."""
    commit_max_records: int = 1_000
    """... or once this many input records and timer firings went into it."""

    @property
    def client_id(self) -> str:
        """The consumer's client id and the producer's transactional id."""
        return f"{self.app}.{self.instance_id}"


@dataclass
class RunnerStats:
    turns: int = 0
    records: int = 0
    fires: int = 0
    aborts: int = 0
    failures: int = 0
    """Units of work (one input record, one timer, one maintenance step) that raised and were
    undone: the input was refused or the key quarantined, and the loop went on."""
    restores: list[Any] = field(default_factory=list)


class Runner:
    """One process's share of the app's partitions. Stop it with the `stop` event."""

    def __init__(
        self, cfg: RunnerConfig, processor: Processor, clock: Clock, clients: Clients
    ) -> None:
        self.cfg = cfg
        self.processor = processor
        self.clock = clock
        self.clients = clients
        self.tasks: dict[int, Task] = {}
        self.stats = RunnerStats()
        self.lag = LagTracker(cfg.app)
        self.restoring: dict[int, tuple[int, int]] = {}
        """Partitions being restored now: (changelog records replayed, to replay)."""
        self._changelog_offsets: dict[int, int] = {}
        self.consumer = clients.consumer(
            cfg.app,
            cfg.client_id,
            **{
                "partition.assignment.strategy": "range",  # co-partitioned topics stay together
                "session.timeout.ms": cfg.session_timeout_ms,
                "heartbeat.interval.ms": max(500, cfg.session_timeout_ms // 5),
                "max.poll.interval.ms": 600_000,
                "queued.max.messages.kbytes": 32_768,
            },
        )
        self.session = TransactionalSession(
            clients,
            cfg.client_id,
            producer_options={
                "linger.ms": 5,
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 1_000_000,
            },
        )
        self._committed: dict[tuple[str, int], int] = {}
        """Input offsets as last committed, for every assigned partition."""
        self._consumed: dict[tuple[str, int], int] = {}
        """Positions read in the open transaction: only these are sent at its commit (or one
        committed position when there are none, so a zombie that lost its partitions is still
        fenced by the group metadata)."""
        self._opened_ms = 0
        self._units = 0
        """Input records and timer firings in the open transaction."""
        self._in_turn = False

    # -- assignment --------------------------------------------------------------------------

    def _open_store(self, partition: int, wipe: bool) -> Store:
        if self.cfg.state_dir is None:
            return MemoryStore()
        path = self.cfg.state_dir / str(partition)
        if wipe:
            RocksStore.wipe(path)
        return RocksStore(path)

    def _on_assign(self, consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        committed = retrying(
            lambda: consumer.committed(partitions, timeout=30), "committed offsets"
        )
        for tp in committed:
            self._committed[(tp.topic, tp.partition)] = max(tp.offset, 0)
        for p in sorted({tp.partition for tp in partitions}):
            if p in self.tasks:
                continue
            store = self._open_store(p, wipe=False)
            store, done = restore(
                store,
                lambda wipe, p=p: self._open_store(p, wipe),  # type: ignore[misc]
                self.clients,
                self.cfg.changelog_topic,
                p,
                progress=lambda done, total, p=p: self.restoring.__setitem__(p, (done, total)),  # type: ignore[misc]
            )
            self.restoring.pop(p, None)
            self.stats.restores.append(done)
            log.info("partition %d restored: %s", p, done)
            task = Task(p, store, self.clock.now_ms(), self.cfg.window_ms)
            task.changelog = self.cfg.changelog_topic
            task._emit = self._produce
            task.prefetch = lambda key, task=task: self.processor.prefetch(task, key)  # type: ignore[misc]
            task.load_window(self.clock.now_ms())
            self.tasks[p] = task

    def _on_revoke(self, consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        if self.session.open:  # the open transaction's work is redone by the next owner
            self._abort()
            self._consumed = {}
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)
        for p in sorted({tp.partition for tp in partitions}):
            task = self.tasks.pop(p, None)
            if task is not None:
                task.store.close()

    # -- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self.subscribe()
        try:
            while not stop.is_set():
                self.turn()
        finally:
            self.close()

    def subscribe(self) -> None:
        """Join the app's group on its input topics; partitions come (and are restored) and go
        in the rebalance callbacks, which run inside a turn's `consume`."""
        self.consumer.subscribe(
            self.cfg.input_topics, on_assign=self._on_assign, on_revoke=self._on_revoke
        )

    def turn(self) -> None:
        """One turn: read a batch, process it, run due maintenance and timers, all in the open
        transaction (opened by the first unit of work), and commit it when it is due."""
        self._in_turn = True
        msgs = self.consumer.consume(
            num_messages=self.cfg.max_records_per_turn, timeout=self._poll_timeout_s()
        )
        self.lag.update(self.consumer)
        now = self.clock.now_ms()
        consumed = self._consumed
        units = 0
        for msg in msgs:
            if not self._usable(msg):
                continue
            task = self.tasks.get(msg.partition() or 0)
            if task is None:
                continue
            self._begin(now)
            record = record_of(msg, now)
            if not task.attempt(
                partial(self.processor.process, task, record, now),
                partial(self.processor.refuse, task, record, now_ms=now),
            ):
                self._failed("processing", record.topic, record.partition, record.offset)
            consumed[(msg.topic() or "", msg.partition() or 0)] = (msg.offset() or 0) + 1
            units += 1
        self.stats.records += units
        for task in self.tasks.values():
            if task.maintenance_pending:
                self._begin(now)
                task.maintenance_pending = self._maintain(task, now)
        budget = self.cfg.max_fires_per_turn  # shared by all tasks: bounded transactions
        tasks = list(self.tasks.values())
        start = self.stats.turns % len(tasks) if tasks else 0
        for task in tasks[start:] + tasks[:start]:  # a different partition goes first each turn
            for key in task.due(now, budget):
                self._begin(now)
                if not task.attempt(
                    partial(self.processor.fire, task, key, now),
                    partial(self.processor.quarantine, task, key, now_ms=now),
                ):
                    self._failed("firing", repr(key), task.partition, -1)
                self.stats.fires += 1
                units += 1
                budget -= 1
        self._units += units
        if self.session.open and self._commit_due(now):
            self._commit()
        self.stats.turns += 1
        self._in_turn = False

    def _poll_timeout_s(self) -> float:
        """How long an idle turn waits for input: not past the open transaction's commit."""
        if not self.session.open:
            return self.cfg.idle_poll_s
        left_ms = self._opened_ms + self.cfg.commit_interval_ms - self.clock.now_ms()
        return max(0.0, min(self.cfg.idle_poll_s, left_ms / 1000))

    def _commit_due(self, now_ms: int) -> bool:
        cfg = self.cfg
        return (
            now_ms - self._opened_ms >= cfg.commit_interval_ms
            or self._units >= cfg.commit_max_records
            or any(task.urgent for task in self.tasks.values())
        )

    @staticmethod
    def _usable(msg: MessageLike) -> bool:
        err = msg.error()
        if err is None:
            return True
        if err.code() != KafkaError._PARTITION_EOF:
            log.warning("consumer error: %s", err)
        return False

    def _maintain(self, task: Task, now_ms: int) -> bool:
        """One maintenance step as a unit; True while more steps remain. A step that raises is
        undone and maintenance stops until the partition is assigned again (no hot loop)."""
        done = False

        def step() -> None:
            nonlocal done
            done = self.processor.maintain(task, now_ms)

        def failed(exc: Exception) -> None:
            log.error("partition %d: maintenance failed: %s", task.partition, exc, exc_info=exc)

        if not task.attempt(step, failed):
            self._failed("maintaining", "partition", task.partition, -1)
            return False
        return not done

    def _failed(self, what: str, where: str, partition: int, offset: int) -> None:
        self.stats.failures += 1
        log.error("%s %s[%d]@%d failed and was undone; going on", what, where, partition, offset)

    # -- the transaction ---------------------------------------------------------------------

    def _begin(self, now_ms: int) -> None:
        if not self.session.open:
            self.session.begin()
            self._changelog_offsets = {}
            self._opened_ms = now_ms
            self._units = 0

    def _produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        if topic != self.cfg.changelog_topic:
            self.session.produce(topic, partition, key, value, headers)
            return
        self.session.produce(
            topic, partition, key, value, headers, on_delivery=self._changelog_delivered
        )

    def _changelog_delivered(self, err: KafkaError | None, msg: MessageLike) -> None:
        """The changelog offset each partition's store will record when the batch is applied."""
        if err is None:
            p, off = msg.partition() or 0, msg.offset() or 0
            self._changelog_offsets[p] = max(self._changelog_offsets.get(p, -1), off)

    def _commit(self) -> None:
        for task in self.tasks.values():
            task.changelog_records()
        consumed, self._consumed = self._consumed, {}
        offsets = consumed or dict(list(self._committed.items())[:1])
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        outcome = self.session.commit(tps, self.consumer.consumer_group_metadata())
        if outcome is not Outcome.committed:
            self.stats.aborts += 1
            self._reset_tasks()
            self._rewind()
            return
        self._committed.update(consumed)
        for p, task in self.tasks.items():
            task.committed(self._changelog_offsets.get(p))

    def _abort(self) -> None:
        self.stats.aborts += 1
        try:
            self.session.abort()
        finally:
            self._reset_tasks()

    def _reset_tasks(self) -> None:
        now = self.clock.now_ms()
        for task in self.tasks.values():
            task.reset_after_abort(now)

    def _rewind(self) -> None:
        """After an abort, read the aborted inputs again from the last committed offsets."""
        assignment = self.consumer.assignment()
        if not assignment:
            return
        committed = retrying(
            lambda: self.consumer.committed(assignment, timeout=30), "committed offsets"
        )
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else 0
            self._committed[(tp.topic, tp.partition)] = offset
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:  # lost in a rebalance meanwhile: the next owner reads it
                log.info("not rewinding %s[%d]: %s", tp.topic, tp.partition, exc)

    def commit_now(self) -> None:
        """Commit the open transaction, if any, without waiting for its interval (between
        turns: at close, or a test driver in which no time passes)."""
        if self.session.open and not self._in_turn:
            self._commit()

    def close(self) -> None:
        """Commit what the last whole turn left open (abort it if a turn broke off), close."""
        try:
            self.commit_now()
            if self.session.open:
                self._abort()
        finally:
            for task in self.tasks.values():
                task.store.close()
            self.tasks.clear()
            self.consumer.close()
            self.session.close()
