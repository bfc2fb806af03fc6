"""The processing loop: consume -> process -> punctuate -> one EOS-v2 transaction -> apply state.

A transaction spans turns: it opens with the first unit of work and commits when it is
`commit_interval_ms` old, when `commit_max_records` inputs and firings went into it, at the end
of a turn in which a processor asked for it (`commit_soon`: a run due now must not wait), or
at once, mid-turn, when it has produced `commit_max_output` records (well within the broker's
transaction timeout). What it produced is visible only at its commit, so the interval is how
long a record may wait to be seen (Kafka Streams under exactly-once commits every 100 ms
too); timers still fire on time, within the open transaction. A turn that did nothing opens
nothing; a record that cannot be produced (a fenced producer) abandons the transaction.

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
from collections.abc import Sequence
from functools import partial

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kadence.clock import Clock
from kadence.metrics import LagTracker
from kadence.work_cpu import WorkCpu
from streams.kafkaio.clients import Clients
from streams.kafkaio.ports import ConsumerLike, MessageLike
from streams.kafkaio.reading import usable
from streams.kafkaio.retry import retrying
from streams.kafkaio.session import Outcome, TransactionalSession
from streams.runtime.coalescing import Coalescer
from streams.runtime.config import PRODUCER_OPTIONS, RunnerConfig, RunnerStats
from streams.runtime.context import Headers
from streams.runtime.processor import Coalescing, Owning, Processor, Splitting, Together
from streams.runtime.records import InputRecord, record_of
from streams.runtime.replays import Replays
from streams.runtime.restore import restore_all
from streams.runtime.standby import standbys_for
from streams.runtime.store import open_store
from streams.runtime.task import Task

log = logging.getLogger(__name__)


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
        self.work = WorkCpu(cfg.input_topics)  # poll, <topic>, maintain, fire, commit, standby
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
            producer_options=PRODUCER_OPTIONS,
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
        self._produced = 0
        """Records produced in the open transaction."""
        self._coalescer: Coalescer | None = None
        """Every task's, one for the process (its transaction is every task's): groups of
        records from all the partitions it owns (coalescing.py)."""
        self._broken: KafkaException | None = None
        """Why a record of the open transaction could not be produced: it must not commit."""
        self._in_turn = False
        self._open_store = partial(open_store, cfg.state_dir)
        self.replays = Replays(cfg.replay_topics, cfg.write_behind_ms, processor)
        self._split = processor.split if isinstance(processor, Splitting) else None
        self._together = processor.process_together if isinstance(processor, Together) else None
        self._units_per_message = 1.0
        """Units of work a record held lately (a batch of outcomes holds hundreds): a turn
        reads `max_records_per_turn` units' worth of records, so the timers still fire on time
        whatever the records carry."""
        self.standbys = standbys_for(cfg, clients, self._open_store)
        self._standbys_due = False  # a revocation: copies of what it took follow

    # -- assignment --------------------------------------------------------------------------

    def _on_assign(self, consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        committed = retrying(
            lambda: consumer.committed(partitions, timeout=30), "committed offsets"
        )
        for tp in committed:
            self._committed[(tp.topic, tp.partition)] = max(tp.offset, 0)
        new = sorted({tp.partition for tp in partitions} - set(self.tasks))
        if self.standbys is not None:  # a copy of a partition owned now is closed first
            self.standbys.follow(self.standbys.every - {*self.tasks, *new})
        restored = restore_all(
            {p: self._open_store(p, wipe=False) for p in new},
            self._open_store,
            self.clients,
            self.cfg.changelog_topic,
            progress=lambda p, done, total: self.restoring.__setitem__(p, (done, total)),
        )
        for p in new:
            store, done = restored[p]
            self.restoring.pop(p, None)
            self.stats.restores.append(done)
            log.info("partition %d restored: %s", p, done)
            task = Task(p, store, self.clock.now_ms(), self.cfg.window_ms)
            task.changelog = self.cfg.changelog_topic
            task._emit = self._produce
            task.prefetch = lambda key, task=task: self.processor.prefetch(task, key)  # type: ignore[misc]
            task.replay_topics = self.cfg.replay_topics
            if isinstance(self.processor, Coalescing):
                if self._coalescer is None:
                    self._coalescer = self.processor.coalescer(task.record_limit)
                task.coalescer = self._coalescer
            task.load_window(self.clock.now_ms())
            self.tasks[p] = task
        self._tell_owned()
        starts = self.replays.starts({p: self.tasks[p] for p in new}, self._committed)
        if starts:  # read from the replay points (replays.py): assigned here, with offsets
            consumer.assign(
                [
                    TopicPartition(
                        tp.topic, tp.partition, starts.get((tp.topic, tp.partition), tp.offset)
                    )
                    for tp in partitions
                ]
            )

    def _on_revoke(self, consumer: ConsumerLike, partitions: list[TopicPartition]) -> None:
        if self.session.open:  # the open transaction's work is redone by the next owner
            self._abort()
            self._consumed = {}
        for tp in partitions:
            self._committed.pop((tp.topic, tp.partition), None)
            self.replays.forget(tp.topic, tp.partition)
        for p in sorted({tp.partition for tp in partitions}):
            task = self.tasks.pop(p, None)
            if task is not None:
                task.store.close()
                self._standbys_due = True
        self._tell_owned()

    def _tell_owned(self) -> None:
        """Tell the processor which tasks the process owns now (`Owning`)."""
        if isinstance(self.processor, Owning):
            self.processor.owned(self.tasks)

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
        self.work.switch("poll")  # rebalances and restores (in consume's callbacks) included
        msgs = self.consumer.consume(
            num_messages=self._turn_messages(), timeout=self._poll_timeout_s()
        )
        self.lag.update(self.consumer)
        now = self.clock.now_ms()
        whole = self._process(msgs, now) and self._maintenance(now) and self._fire(now)
        if whole and not self.session.open and self.replays.due(self.tasks, now):
            self._begin(now)  # a deferred state has waited long enough: a commit writes it
        if whole and self.session.open and self._commit_due(now):
            self._commit()
        if self.standbys is not None:  # streams/runtime/standby.py
            self.work.switch("standby")
            if self._standbys_due:
                self.standbys.follow(self.standbys.every - set(self.tasks))
                self._standbys_due = False
            self.standbys.step()
        self.stats.turns += 1
        self._in_turn = False

    def _process(self, msgs: Sequence[MessageLike], now: int) -> bool:
        """Each input record as a unit, or each entry of one that carries several (`Splitting`);
        False when the transaction was aborted meanwhile."""
        for msg in msgs:
            if not usable(msg):
                continue
            task = self.tasks.get(msg.partition() or 0)
            if task is None:
                continue
            self.work.topic(msg.topic() or "")
            self._begin(now)
            record = record_of(msg, now)
            units = (self._split(record) if self._split is not None else None) or (record,)
            if self.replays.is_replay(record):  # processed before: its deferred effect again
                for unit in units:
                    self.replays.replay(task, unit, now)
                    if not self._settle(commit=False):
                        return False
                if not self._settle():
                    return False
                continue
            last = len(units) - 1
            self._units_per_message += (len(units) - self._units_per_message) / 8
            if last and self._together_done(task, units, now):
                self._consumed[(record.topic, record.partition)] = record.offset + 1
                self.stats.records += 1
                if not self._settle():
                    return False
                continue
            for i, unit in enumerate(units):
                self._unit(task, unit, now)
                if i == last:
                    self._consumed[(record.topic, record.partition)] = record.offset + 1
                    self.stats.records += 1
                if not self._settle(commit=i == last):
                    return False
        return True

    def _turn_messages(self) -> int:
        """Records one turn reads: `max_records_per_turn` units of work at the recent units
        per record (at least one record)."""
        return max(1, int(self.cfg.max_records_per_turn / max(1.0, self._units_per_message)))

    def _unit(self, task: Task, record: InputRecord, now: int) -> None:
        """Process one unit; a unit that raises is refused (its reason recorded)."""
        if not task.attempt(
            partial(self.processor.process, task, record, now),
            partial(self.processor.refuse, task, record, now_ms=now),
        ):
            self._failed("processing", record.topic, record.partition, record.offset)
        self._units += 1

    def _together_done(self, task: Task, units: Sequence[InputRecord], now: int) -> bool:
        """The entries of one record as one unit (`Together`); False: there is no such
        processor, or the unit raised and was undone (each entry is then a unit of its own)."""
        together = self._together
        if together is None:
            return False
        first = units[0]

        def undone(exc: Exception) -> None:
            log.info(
                "%s[%d]@%d: its %d entries failed as one unit (%s: %s); each is taken alone",
                first.topic,
                first.partition,
                first.offset,
                len(units),
                type(exc).__name__,
                exc,
            )

        if not task.attempt(partial(together, task, units, now), undone):
            return False
        self._units += len(units)
        return True

    def _maintenance(self, now: int) -> bool:
        for task in self.tasks.values():
            if task.maintenance_pending:
                self.work.switch("maintain")
                self._begin(now)
                task.maintenance_pending = self._maintain(task, now)
                if not self._settle():
                    return False
        return True

    def _fire(self, now: int) -> bool:
        """Due timers as units, `max_fires_per_turn` in all, a different partition first each
        turn; False when the transaction was aborted meanwhile."""
        budget = self.cfg.max_fires_per_turn
        self.work.switch("fire")  # loading the timer window (and decoding ahead) included
        tasks = list(self.tasks.values())
        start = self.stats.turns % len(tasks) if tasks else 0
        for task in tasks[start:] + tasks[:start]:
            for key in task.due(now, budget):
                self._begin(now)
                if not task.attempt(
                    partial(self.processor.fire, task, key, now),
                    partial(self.processor.quarantine, task, key, now_ms=now),
                ):
                    self._failed("firing", repr(key), task.partition, -1)
                self.stats.fires += 1
                self._units += 1
                budget -= 1
                if not self._settle():
                    return False
        return True

    def _settle(self, *, commit: bool = True) -> bool:
        """After each unit: abandon a transaction that cannot commit, commit one that produced
        `commit_max_output` records, those held for its commit included (not between two
        entries of one record: `commit` False).
        False: it was aborted, the rest of the turn must not run."""
        if self._broken is not None:
            self._abandon(self._broken)
            return False
        if commit and self._produced + self._waiting() >= self.cfg.commit_max_output:
            return self._commit()
        return True

    def _waiting(self) -> int:
        """Records the open transaction holds for its commit (coalescing.py)."""
        return 0 if self._coalescer is None else self._coalescer.count

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
            self._produced = 0

    def _produce(
        self,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
    ) -> None:
        if self._broken is not None:
            return  # the transaction will be abandoned and its inputs read again
        self._produced += 1
        on_delivery = self._changelog_delivered if topic == self.cfg.changelog_topic else None
        try:
            self.session.produce(topic, partition, key, value, headers, on_delivery=on_delivery)
        except KafkaException as exc:
            log.error("producing to %s failed: %s; abandoning the transaction", topic, exc)
            self._broken = exc

    def _changelog_delivered(self, err: KafkaError | None, msg: MessageLike) -> None:
        """The changelog offset each partition's store will record when the batch is applied."""
        if err is None:
            p, off = msg.partition() or 0, msg.offset() or 0
            self._changelog_offsets[p] = max(self._changelog_offsets.get(p, -1), off)

    def _commit(self) -> bool:
        """Commit the open transaction; False when it was aborted instead."""
        with self.work.during("commit"):  # the changelog, the transaction, the store
            self.replays.write_due(self.tasks, self.clock.now_ms())  # what waited long enough
            for task in self.tasks.values():
                task.changelog_records()
            if self._broken is not None:
                self._abandon(self._broken)
                return False
            consumed, self._consumed = self._consumed, {}
            offsets = consumed or dict(list(self._committed.items())[:1])
            tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            outcome = self.session.commit(tps, self.consumer.consumer_group_metadata())
            if outcome is not Outcome.committed:
                self.stats.aborts += 1
                self._reset_tasks()
                self._rewind()
                return False
            self._committed.update(consumed)
            for p, task in self.tasks.items():
                task.committed(self._changelog_offsets.get(p))
            return True

    def _abandon(self, exc: KafkaException) -> None:
        """A record could not be produced: abort (or replace the producer), read inputs again."""
        self._broken = None
        self.stats.aborts += 1
        self._consumed = {}
        self.session.abandon(exc)
        self._reset_tasks()
        self._rewind()

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
        self._tell_owned()  # what it kept of the aborted work is gone with it

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
        starts = self.replays.starts(self.tasks, self._committed)  # what the abort dropped
        for tp in committed:
            offset = starts.get((tp.topic, tp.partition), self._committed[(tp.topic, tp.partition)])
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
            if self.standbys is not None:
                self.standbys.close()
            self.consumer.close()
            self.session.close()
