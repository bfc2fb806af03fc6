"""The processing loop: consume -> process -> punctuate -> one EOS-v2 transaction -> apply state.

Commit order, every turn (the whole correctness argument lives in `_commit`):
1. records produced by processing and by timers, and the changelog records of every state
   write, all inside the open transaction;
2. `send_offsets_to_transaction(positions, consumer_group_metadata())`: a process that lost its
   partitions in a rebalance is fenced here and can commit nothing (KIP-447);
3. `commit_transaction()`: outputs, state changes and input offsets become visible together;
4. only then the buffered writes go to RocksDB, with the changelog offset, in one WriteBatch.
A crash before 3 aborts everything and the inputs are read again; a crash between 3 and 4 is
repaired by restore, which replays the changelog from the offset RocksDB last recorded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from kadence.clock import Clock
from kadence.metrics import LagTracker
from kadence.sizing import RECORD_LIMIT, check_fits
from streams.kafkaio.retry import retrying
from streams.runtime.restore import restore
from streams.runtime.store import Batch, MemoryStore, RocksStore, Store, pack, payload_of, wake_of
from streams.runtime.txn import (
    HUNG_AFTER_S,
    OFFSETS_CALL_TIMEOUT_S,
    ProducerStuckError,
    error_of,
    fatal,
    requires_abort,
    retriable,
    until_done,
)
from streams.runtime.wheel import TimerWheel

log = logging.getLogger(__name__)
STUCK_AFTER_S = 30.0
"""A transactional call that has not returned after this long is stuck: replace the producer."""

Headers = list[tuple[str, str | bytes | None]]


@dataclass(frozen=True, slots=True)
class InputRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


@dataclass(slots=True)
class _Unit:
    """What one unit of work did so far: batch entries before it touched them, its records."""

    undo: dict[bytes, tuple[bool, bytes | None]] = field(default_factory=dict)
    staged: list[tuple[str, int | None, bytes | None, bytes | None, Headers]] = field(
        default_factory=list
    )


class Task:
    """Everything one partition owns: its store, the open batch, its timer wheel, a cache."""

    def __init__(self, partition: int, store: Store, now_ms: int, window_ms: int) -> None:
        self.partition = partition
        self.store = store
        self.batch = Batch()
        self.wheel = TimerWheel(now_ms)
        self.window_ms = window_ms
        self.loaded_until_ms = -1
        """The due index is loaded into the wheel up to here; -1: nothing yet, so the first
        load also picks up everything that fell due while no one owned the partition."""
        self.cache: dict[bytes, Any] = {}
        """Processor-owned decoded state; dropped on abort and revoke."""
        self._emit: Callable[[str, int | None, bytes | None, bytes | None, Headers], None] = (
            lambda *_: None
        )
        self.changelog: str = ""
        self.maintenance_pending = True
        """The processor's `maintain` runs, in bounded steps, until it reports done."""
        self.prefetch: Callable[[bytes], None] = lambda _key: None
        """Called for each key entering the timer window: decode ahead, not at the due time."""
        self.record_limit = RECORD_LIMIT
        self._units: list[_Unit] = []

    # -- state -------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """Read your own writes: the open batch first, then the store."""
        value = self.batch.values[key] if key in self.batch.values else self.store.get(key)
        return payload_of(value) if value is not None else None

    def put(self, key: bytes, payload: bytes | None, wake_ms: int | None) -> None:
        """Write state (None deletes); it is changelogged in this transaction."""
        value = pack(wake_ms, payload) if payload is not None else None
        if self._units:
            undo = self._units[-1].undo
            if key not in undo:
                undo[key] = (key in self.batch.values, self.batch.values.get(key))
        self.batch.put(key, value)
        self._send(self.changelog, self.partition, key, value, [])
        if wake_ms is not None and wake_ms <= self.loaded_until_ms:
            self.wheel.insert(wake_ms, key)

    def emit(
        self, topic: str, partition: int | None, key: bytes | None, value: bytes, headers: Headers
    ) -> None:
        self._send(topic, partition, key, value, headers)

    forward = emit

    def keys_after(self, after: bytes, limit: int) -> list[bytes]:
        return self.store.keys_after(after, limit)

    @property
    def timers_loaded_until_ms(self) -> int:
        return self.loaded_until_ms

    def _send(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        check_fits(topic, key, value, headers, self.record_limit)
        if self._units:
            self._units[-1].staged.append((topic, partition, key, value, headers))
        else:
            self._emit(topic, partition, key, value, headers)

    # -- units of work -----------------------------------------------------------------------

    def attempt(self, work: Callable[[], None], on_error: Callable[[Exception], None]) -> bool:
        """Run `work` as one unit: its state writes and records take effect together or not at
        all. If it raises (a bug, a record too large to write), everything it did is undone
        and `on_error(exc)` runs as a unit of its own (refuse the input, quarantine the key);
        should that fail too, it is undone and logged. Units nest: an inner unit that fails
        leaves what the outer one did. True when `work` succeeded."""
        self._units.append(_Unit())
        try:
            work()
        except Exception as exc:
            self._rollback()
            self._units.append(_Unit())
            try:
                on_error(exc)
            except Exception:
                self._rollback()
                log.exception("partition %d: handling a failed unit failed too", self.partition)
            else:
                self._finish()
            return False
        self._finish()
        return True

    def _finish(self) -> None:
        unit = self._units.pop()
        if self._units:
            outer = self._units[-1]
            for key, before in unit.undo.items():
                outer.undo.setdefault(key, before)
            outer.staged.extend(unit.staged)
            return
        for record in unit.staged:
            self._emit(*record)

    def _rollback(self) -> None:
        unit = self._units.pop()
        for key, (present, before) in unit.undo.items():
            if present:
                self.batch.values[key] = before
            else:
                self.batch.values.pop(key, None)
            self.cache.pop(key, None)

    # -- timers ------------------------------------------------------------------------------

    def due(self, now_ms: int, limit: int) -> list[bytes]:
        """Keys whose wake time has come (never early), loading the next window from the index."""
        horizon = now_ms + self.window_ms
        if horizon > self.loaded_until_ms:
            self.wheel.advance_to(now_ms)
            for wake, key in self.store.due_between(self.loaded_until_ms, horizon):
                if not self.wheel.insert(wake, key):
                    raise RuntimeError(
                        f"timer wheel span too small for the {self.window_ms} ms window"
                    )
                self.prefetch(key)
            self.loaded_until_ms = horizon
        keys: list[bytes] = []
        for wake, key in self.wheel.pop_due(now_ms, limit):
            value = self.batch.values[key] if key in self.batch.values else self.store.get(key)
            current = wake_of(value)
            if current is not None and current == wake:  # stale entries were moved or deleted
                keys.append(key)
        return keys

    def reset_after_abort(self, now_ms: int) -> None:
        self.maintenance_pending = True
        self._units.clear()
        self.batch = Batch()
        self.cache.clear()
        self.wheel.clear(now_ms)
        self.loaded_until_ms = -1


class Processor(Protocol):
    """What the runtime drives. Both calls run inside the open transaction."""

    def process(self, task: Task, record: InputRecord, now_ms: int) -> None: ...

    def fire(self, task: Task, key: bytes, now_ms: int) -> None: ...

    def refuse(self, task: Task, record: InputRecord, exc: Exception, now_ms: int) -> None:
        """`process` raised: record why (a `rejected` record) and go on with the next input."""
        ...

    def quarantine(self, task: Task, key: bytes, exc: Exception, now_ms: int) -> None:
        """`fire` raised for `key`: keep it from firing again, say so, and go on."""
        ...

    def prefetch(self, task: Task, key: bytes) -> None: ...

    def maintain(self, task: Task, now_ms: int) -> bool:
        """One bounded step of after-assignment upkeep; True when there is nothing left."""
        ...


@dataclass
class RunnerConfig:
    app: str
    instance_id: str
    bootstrap: str
    input_topics: list[str]
    changelog_topic: str
    state_dir: Path | None
    """None keeps state in memory (tests); it is still changelogged and restored."""
    session_timeout_ms: int = 10_000
    window_ms: int = 60_000
    max_fires_per_turn: int = 5_000
    max_records_per_turn: int = 2_000
    idle_poll_s: float = 0.02


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

    def __init__(self, cfg: RunnerConfig, processor: Processor, clock: Clock) -> None:
        self.cfg = cfg
        self.processor = processor
        self.clock = clock
        self.tasks: dict[int, Task] = {}
        self.stats = RunnerStats()
        self.lag = LagTracker(cfg.app)
        self.restoring: dict[int, tuple[int, int]] = {}
        """Partitions being restored now: (changelog records replayed, to replay)."""
        self._changelog_offsets: dict[int, int] = {}
        self.consumer = Consumer(
            {
                "bootstrap.servers": cfg.bootstrap,
                "group.id": cfg.app,
                "client.id": f"{cfg.app}.{cfg.instance_id}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range",  # co-partitioned topics stay together
                "session.timeout.ms": cfg.session_timeout_ms,
                "heartbeat.interval.ms": max(500, cfg.session_timeout_ms // 5),
                "max.poll.interval.ms": 600_000,
                "queued.max.messages.kbytes": 32_768,
            }
        )
        self.producer = self._new_producer()
        self._in_txn = False
        self._committed: dict[tuple[str, int], int] = {}
        """Input offsets as last committed: every transaction re-sends them with the group
        metadata, timer-only ones included, so a zombie that lost its partitions is fenced."""

    def _new_producer(self) -> Producer:
        """The process's transactional producer; a new one fences every older one."""
        producer = Producer(
            {
                "bootstrap.servers": self.cfg.bootstrap,
                "client.id": f"{self.cfg.app}.{self.cfg.instance_id}",
                "transactional.id": f"{self.cfg.app}.{self.cfg.instance_id}",
                "transaction.timeout.ms": 10_000,
                "linger.ms": 5,
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        until_done(lambda: producer.init_transactions(30), "initialising transactions")
        return producer

    def _replace_producer(self, why: str) -> None:
        """Abandon a stuck producer: a new one (same transactional id) fences it and aborts
        its open transaction; the turn's inputs are read again."""
        log.error("%s: replacing the transactional producer", why)
        self.stats.aborts += 1
        self.producer = self._new_producer()
        self._in_txn = False
        now = self.clock.now_ms()
        for task in self.tasks.values():
            task.reset_after_abort(now)
        self._rewind()

    # -- assignment --------------------------------------------------------------------------

    def _open_store(self, partition: int, wipe: bool) -> Store:
        if self.cfg.state_dir is None:
            return MemoryStore()
        path = self.cfg.state_dir / str(partition)
        if wipe:
            RocksStore.wipe(path)
        return RocksStore(path)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
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
                self.cfg.bootstrap,
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
            self.tasks[p] = task

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._in_txn:  # not expected: callbacks run inside consume(), between transactions
            self._abort()
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)
        for p in sorted({tp.partition for tp in partitions}):
            task = self.tasks.pop(p, None)
            if task is not None:
                task.store.close()

    # -- the loop ----------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        self.consumer.subscribe(
            self.cfg.input_topics, on_assign=self._on_assign, on_revoke=self._on_revoke
        )
        try:
            while not stop.is_set():
                self._turn()
        finally:
            self.close()

    def _turn(self) -> None:
        msgs = self.consumer.consume(
            num_messages=self.cfg.max_records_per_turn, timeout=self.cfg.idle_poll_s
        )
        self.lag.update(self.consumer)
        now = self.clock.now_ms()
        consumed: dict[tuple[str, int], int] = {}
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    log.warning("consumer error: %s", err)
                continue
            task = self.tasks.get(msg.partition() or 0)
            if task is None:
                continue
            self._begin()
            record = _record(msg, now)
            if not task.attempt(
                partial(self.processor.process, task, record, now),
                partial(self.processor.refuse, task, record, now_ms=now),
            ):
                self._failed("processing", record.topic, record.partition, record.offset)
            consumed[(msg.topic() or "", msg.partition() or 0)] = (msg.offset() or 0) + 1
            self.stats.records += 1
        for task in self.tasks.values():
            if task.maintenance_pending:
                self._begin()
                task.maintenance_pending = self._maintain(task, now)
        budget = self.cfg.max_fires_per_turn  # shared by all tasks: bounded transactions
        tasks = list(self.tasks.values())
        start = self.stats.turns % len(tasks) if tasks else 0
        for task in tasks[start:] + tasks[:start]:  # a different partition goes first each turn
            for key in task.due(now, budget):
                self._begin()
                if not task.attempt(
                    partial(self.processor.fire, task, key, now),
                    partial(self.processor.quarantine, task, key, now_ms=now),
                ):
                    self._failed("firing", repr(key), task.partition, -1)
                self.stats.fires += 1
                budget -= 1
        if self._in_txn:
            self._commit(consumed)
        self.stats.turns += 1

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

    def _begin(self) -> None:
        if not self._in_txn:
            self.producer.begin_transaction()
            self._in_txn = True
            self._changelog_offsets = {}

    def _produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        changelog = topic == self.cfg.changelog_topic

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is None and changelog:
                p, off = msg.partition() or 0, msg.offset() or 0
                self._changelog_offsets[p] = max(self._changelog_offsets.get(p, -1), off)

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self.producer.produce(topic, **kwargs)
                return
            except BufferError:
                self.producer.poll(0.05)

    def _commit(self, consumed: dict[tuple[str, int], int]) -> None:
        offsets = {**self._committed, **consumed}
        metadata = self.consumer.consumer_group_metadata()
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        producer = self.producer
        try:
            if offsets:  # always, so the coordinator checks our group generation (fencing)
                until_done(
                    lambda: producer.send_offsets_to_transaction(
                        tps, metadata, OFFSETS_CALL_TIMEOUT_S
                    ),
                    "sending offsets",
                    give_up_after_s=STUCK_AFTER_S,
                    attempt_timeout_s=HUNG_AFTER_S,
                )
            until_done(lambda: producer.commit_transaction(60), "committing")
        except ProducerStuckError as exc:
            self._replace_producer(str(exc))
            return
        except KafkaException as exc:
            log.error("transaction failed: %s", error_of(exc))
            if requires_abort(exc):
                self._abort()
                self._rewind()
                return
            if fatal(exc) or retriable(exc):  # unusable, or still failing after STUCK_AFTER_S
                self._replace_producer(f"producer error {error_of(exc)}")
                return
            raise
        self._in_txn = False
        self._committed.update(consumed)
        for p, task in self.tasks.items():
            if p in self._changelog_offsets:
                task.batch.changelog_offset = self._changelog_offsets[p]
            if task.batch:
                task.store.apply(task.batch)
            task.batch = Batch()

    def _abort(self) -> None:
        self.stats.aborts += 1
        try:
            until_done(lambda: self.producer.abort_transaction(30), "aborting")
        except KafkaException as exc:
            if not fatal(exc):
                raise
            log.error("fatal producer error %s while aborting: a new producer", error_of(exc))
            self.producer = self._new_producer()
        finally:
            self._in_txn = False
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

    def close(self) -> None:
        try:
            if self._in_txn:
                self._abort()
        finally:
            for task in self.tasks.values():
                task.store.close()
            self.tasks.clear()
            self.consumer.close()
            self.producer.flush(10)


def _record(msg: Message, now_ms: int) -> InputRecord:
    ts_type, ts = msg.timestamp()
    raw = msg.headers() or []
    headers: Headers = list(raw.items()) if isinstance(raw, dict) else list(raw)
    return InputRecord(
        topic=msg.topic() or "",
        partition=msg.partition() or 0,
        offset=msg.offset() or 0,
        key=msg.key(),
        value=msg.value(),
        headers=headers,
        timestamp_ms=ts if ts_type != 0 else now_ms,
    )
