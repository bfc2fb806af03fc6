"""Issue 29, item 4: the worker's inbox is bounded under any backlog. A tenant at its running cap
holds twice its cap at most (the rest is let go, owed, read again later); past the bound the
worker pauses its partitions. The commit never passes an owed execution, and what is read again
is only what was owed: nothing is lost, nothing claimed is read twice."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import TopicPartition

from bench.stack import INBOX_FULL
from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.metrics import LagTracker
from kadence.models import ExecutionRequested, ExecutionRevoked, HttpTarget
from kadence.settings import KadenceSettings
from streams.worker.active import TxnWork
from streams.worker.backlog import Backlog
from streams.worker.fairness import Fairness
from streams.worker.holding import Holdings
from streams.worker.inbox import Inbox
from streams.worker.metrics import WorkerMetrics
from streams.worker.offsets import decode_metadata, encode_metadata
from testkit.outcomes import revocation_of

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T_MS = datetime_to_ms(T)
TOPIC = "kadence.executions"
CODEC = Codec()
Record = ExecutionRequested | ExecutionRevoked


def ex(tenant: str, n: int, due_s: int = 0) -> ExecutionRequested:
    due = T + timedelta(seconds=due_s)
    return ExecutionRequested(
        execution_id=f"{tenant}/j{n}@2026-12-01T09:00:00.000Z",
        tenant=tenant,
        job_id=f"j{n}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=T,
        target=HttpTarget(url="https://example.com/hook"),
        timeout_ms=1_000,
        lease_ttl_ms=3_000,
    )


def revoked(of: ExecutionRequested) -> ExecutionRevoked:
    return revocation_of(of, at=T)


@dataclass
class FakeConsumer:
    """Partitions as lists of records; `consume` reads from each position, skipping paused
    partitions; `seek` moves a position back."""

    log: dict[int, list[Record]]
    positions: dict[int, int] = field(default_factory=dict)
    paused: set[int] = field(default_factory=set)
    seeks: list[tuple[int, int]] = field(default_factory=list)

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in self.log]

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused |= {tp.partition for tp in partitions}

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused -= {tp.partition for tp in partitions}

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append((tp.partition, tp.offset))
        self.positions[tp.partition] = tp.offset

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(TOPIC, tp.partition, self.positions.get(tp.partition, 0))
            for tp in partitions
        ]

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return 0, len(self.log[partition.partition])

    def consume(self, limit: int = 500) -> list[tuple[int, int, Record]]:
        out = []
        for p, records in self.log.items():
            if p in self.paused:
                continue
            pos = self.positions.get(p, 0)
            got = records[pos : pos + limit]
            out += [(p, pos + i, r) for i, r in enumerate(got)]
            self.positions[p] = pos + len(got)
        return out


@dataclass
class Stack:
    """An inbox, its backlog and a fake consumer, read as the worker loop reads them."""

    consumer: FakeConsumer
    inbox: Inbox
    backlog: Backlog
    taken: list[tuple[int, int]] = field(default_factory=list)
    """(partition, offset) of every execution the inbox held, in the order it took them."""

    @classmethod
    def of(
        cls,
        log: dict[int, list[Record]],
        cap: int = 2,
        max_executions: int = 100,
        metrics: WorkerMetrics | None = None,
    ) -> Stack:
        settings = KadenceSettings(worker_inbox_max_executions=max_executions)
        consumer = FakeConsumer(log)
        inbox = Inbox(Fairness(max_running=0, caps={"flood": cap}))  # the others: no cap
        clock = iter(range(0, 1_000_000, 10))  # each settle 10 s after the last
        backlog = Backlog(inbox, settings, consumer, metrics=metrics, monotonic=lambda: next(clock))
        return cls(consumer, inbox, backlog)

    def turn(self, lag: LagTracker | None = None, limit: int = 500) -> None:
        for p, o, record in self.consumer.consume(limit):
            if not self.inbox.wanted(p, o):
                self.inbox.read(p, o)
            elif isinstance(record, ExecutionRevoked):
                self.inbox.read(p, o)
                self.inbox.revoke(record, p, o)
            elif self.inbox.add(p, o, record, CODEC.encode(record)) is not None:
                self.taken.append((p, o))
        self.backlog.settle(lag)

    def running(self, by_tenant: dict[str, int], now_ms: int = T_MS - 1) -> list[str]:
        """The worker's runs per tenant are `by_tenant`: what `due` hands out by `now_ms`."""
        got = self.inbox.due(now_ms, 1_000, by_tenant)
        return [i.execution.execution_id for i in got]

    def drain(self) -> set[str]:
        """What `due` hands out by T while each run ends at once (its cap never reached)."""
        out: set[str] = set()
        while got := self.running({}, T_MS):
            out.update(got)
        return out


def owed_in_commit(inbox: Inbox, p: int) -> tuple[int, frozenset[int]]:
    offset, meta = inbox.offsets()[p]
    parsed = decode_metadata(offset, meta)
    assert parsed is not None
    return offset, parsed[1]


def test_a_tenant_at_its_cap_holds_twice_its_cap_and_the_others_are_read() -> None:
    records: list[Record] = []
    for n in range(1_000):
        records.append(ex("flood", n, due_s=5))
        if n % 50 == 0:
            records.append(ex("small", n, due_s=5))
    stack = Stack.of({0: records}, cap=2)
    stack.running({"flood": 2})  # its two slots taken by runs that hang
    for _ in range(3):
        stack.turn()
    held = [stack.inbox._by_tenant.get(t, 0) for t in ("flood", "small")]
    assert held == [4, 20]  # the flood's quota; every small execution
    assert stack.inbox.count == 24 and not stack.consumer.paused
    first, named = owed_in_commit(stack.inbox, 0)
    assert first == 0  # nothing held or owed is passed
    owed = {o for o, r in enumerate(records) if r.tenant == "flood"} - {o for _p, o in stack.taken}
    assert owed <= named and len(stack.inbox.owed) == len(owed) == 996
    due = stack.running({"flood": 2}, T_MS + 5_000)
    assert sum(1 for i in due if i.startswith("small/")) == 20  # the others start on time


def test_what_was_let_go_is_read_again_once_and_only_it() -> None:
    records: list[Record] = [ex("flood" if n % 3 else "small", n) for n in range(300)]
    stack = Stack.of({0: records}, cap=2, max_executions=1_000)
    stack.running({"flood": 2})
    stack.turn()
    started = set(stack.running({"flood": 2}, T_MS))  # the small ones
    assert len(started) == 100
    owed = set(range(300)) - {o for _p, o in stack.taken}
    assert len(owed) == 196  # 200 flood, 4 held
    started |= stack.drain()  # the flood's runs end as they start: its 4 held start, and
    assert len(started) == 104  # it takes its owed executions again
    stack.turn()  # seeks back
    assert stack.consumer.seeks == [(0, min(owed))]
    stack.turn()
    again = [o for _p, o in stack.taken[300 - 196 :]]
    assert sorted(again) == sorted(owed)  # each owed one once, nothing claimed read twice
    assert len(stack.inbox.owed) == 0 and not stack.inbox._replay  # over: it may read again
    ids = stack.drain() | started
    assert len(ids) == 300 + 0 and len(stack.taken) == 300  # every execution, once
    assert stack.inbox.offsets()[0] == (300, "")


def test_past_the_bound_reading_pauses_and_what_cannot_start_is_let_go() -> None:
    flood: list[Record] = [ex("flood", n, due_s=60) for n in range(150)]
    stack = Stack.of({0: flood, 1: [ex("small", n, due_s=60) for n in range(60)]}, cap=2)
    stack.turn()  # the flood is not at its cap yet: held up to the bound, the rest owed
    assert stack.inbox.count == 100 and stack.consumer.paused == {0, 1}
    assert len(stack.inbox.owed) == 50 + 60
    assert owed_in_commit(stack.inbox, 1) == (0, frozenset(range(60)))  # nothing passed
    stack.consumer.log[1] += [ex("small", n, due_s=60) for n in range(60, 70)]
    stack.turn()
    assert stack.consumer.positions[1] == 60  # nothing read while paused
    stack.running({"flood": 2})  # now its runs hang
    stack.turn()  # let go down to its quota; under the bound again: resumed, read again
    assert stack.backlog.shed == 96 and stack.inbox._by_tenant == {"flood": 4}
    assert len(stack.inbox._waiting[T_MS + 60_000]) == 4  # their memory is freed
    assert not stack.consumer.paused and stack.consumer.seeks == [(1, 0)]
    lag = LagTracker("g", every_s=0)
    stack.turn(lag)  # the small ones, read again, and the ten new ones
    assert stack.inbox._by_tenant == {"flood": 4, "small": 70}
    assert lag.per_topic == {TOPIC: 146}  # the flood's backlog, owed: in Kafka, in the lag
    assert owed_in_commit(stack.inbox, 0) == (0, frozenset(range(150)))  # 4 held, 146 owed


def test_each_time_reading_pauses_with_the_inbox_full_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`kadence_worker_reading_paused_total`: the signal that a worker's inbox is smaller than
    its share of the look-ahead (B2 at 8 000/s: 38 pauses in 4 minutes on one worker). The log
    line says it too, as bench.stack counts it (INBOX_FULL)."""
    caplog.set_level(logging.INFO, logger="streams.worker.backlog")
    metrics = WorkerMetrics()
    stack = Stack.of({0: [ex("small", n, due_s=60) for n in range(250)]}, metrics=metrics)

    def paused() -> float | None:
        return metrics.registry.get_sample_value("kadence_worker_reading_paused_total")

    stack.turn()
    assert stack.inbox.count == 100 and stack.consumer.paused == {0}
    assert paused() == 1
    stack.turn()  # still full: the same pause
    assert paused() == 1
    started = stack.inbox.due(T_MS + 60_000, 50, {})  # half of it due and handed out
    assert len(started) == 50
    stack.turn()  # room again: reading resumes
    assert not stack.consumer.paused and paused() == 1
    stack.turn()  # read up to the bound again
    assert stack.consumer.paused == {0} and paused() == 2
    assert caplog.text.count(INBOX_FULL) == 2


def test_a_revocation_read_while_its_execution_is_owed_still_revokes_it() -> None:
    target = ex("flood", 7)
    records: list[Record] = [*(ex("flood", n) for n in range(7)), target, revoked(target)]
    stack = Stack.of({0: records}, cap=1)
    stack.running({"flood": 1})
    stack.turn()  # 2 held, the rest owed, the revocation too
    assert owed_in_commit(stack.inbox, 0)[1] >= {7, 8}
    stack.running({})
    stack.turn()
    stack.turn()
    handed = stack.drain()
    assert len(handed) == 7 and target.execution_id not in handed


def test_a_tenant_is_claimed_ahead_only_as_far_as_its_free_slots() -> None:
    """Claims ahead of a tenant whose runs hang would wait, renewed, taking the room of the
    others' claims: only what its free slots can start is claimed ahead."""
    settings = KadenceSettings(worker_concurrency=8)
    inbox = Inbox(Fairness(max_running=0, caps={"flood": 2}))
    holdings = Holdings(settings, "w", inbox)
    for n in range(10):
        holdings.saw(inbox.add(0, n, ex("flood", n, due_s=1)).execution)  # type: ignore[union-attr]
        inbox.add(1, n, ex("small", n, due_s=1))
    inbox.due(T_MS, 8, {"flood": 1})
    txn = TxnWork()
    holdings.claim_ahead(txn, T_MS, {}, set())
    tenants = [run.execution.tenant for run in txn.ahead]
    assert tenants.count("flood") == 1 and tenants.count("small") == 10
    holdings.committed(txn)
    txn = TxnWork()
    holdings.claim_ahead(txn, T_MS, {}, set())
    assert txn.ahead == []  # its one free slot has its claim already


def test_reading_again_stops_once_the_tenant_has_its_quota_again() -> None:
    stack = Stack.of({0: [ex("flood", n) for n in range(200)]}, cap=2)
    stack.running({"flood": 2})
    stack.turn()  # 4 held, 196 owed
    assert len(stack.running({}, T_MS)) == 2  # two start: down to half its quota, still at its cap
    stack.running({"flood": 2})
    stack.turn()
    assert stack.consumer.seeks == [(0, 4)]
    stack.turn(limit=10)  # two taken, then let go again: it wants no more, the reading stops
    assert stack.consumer.seeks == [(0, 4), (0, 200)]
    assert len(stack.taken) == 6 and len(stack.inbox.owed) == 194
    assert owed_in_commit(stack.inbox, 0) == (2, frozenset(range(2, 200)))  # 4 held, 194 owed
    stack.turn()
    assert len(stack.taken) == 6 and stack.consumer.positions[0] == 200


def test_the_backlog_metric_counts_what_is_due_and_waiting_not_what_was_read_ahead() -> None:
    """Issue 30, item 4: `kadence_worker_backlog_records` is the executions due and not started
    that the worker holds plus the lag (what Kafka still has for it, due or not), and falls
    back to 0 as they start; runs read ahead of their due time are not in it."""
    later = [ex("other", n, due_s=60) for n in range(3)]  # read ahead, due in a minute
    flood = [ex("flood", n) for n in range(6)]  # due at T
    consumer = FakeConsumer({0: [*later, *flood]})
    inbox = Inbox(Fairness(max_running=0))
    metrics = WorkerMetrics()
    clock = iter(range(0, 1_000_000, 10))
    settings = KadenceSettings()
    backlog = Backlog(inbox, settings, consumer, metrics=metrics, monotonic=lambda: next(clock))
    lag = LagTracker("workers", every_s=0)

    def read(limit: int) -> None:
        for p, o, record in consumer.consume(limit):
            assert isinstance(record, ExecutionRequested)
            inbox.add(p, o, record)

    def settle(now_ms: int) -> tuple[float | None, float | None, float | None]:
        backlog.settle(lag, now_ms)
        value = metrics.registry.get_sample_value
        return (
            value("kadence_worker_backlog_records"),
            value("kadence_worker_due_not_started", {"tenant": "flood"}),
            value("kadence_worker_due_not_started", {"tenant": "other"}),
        )

    read(5)  # the three read ahead and two of the flood; four not read yet
    assert settle(T_MS - 1) == (4, None, None)  # nothing held is due: the lag alone
    assert settle(T_MS + 1_000) == (2 + 4, 2, None)  # the three read ahead are not backlog
    assert len(inbox.due(T_MS + 1_000, 2, {})) == 2
    assert settle(T_MS + 1_000) == (4, 0, None)  # started: flood's label is 0, not dropped
    read(10)
    assert settle(T_MS + 1_000) == (4, 4, None)  # read, not started: still backlog
    assert len(inbox.due(T_MS + 61_000, 1_000, {})) == 4 + 3  # everything starts
    assert settle(T_MS + 61_000) == (0, 0, None)


def test_a_replay_whose_log_ends_before_its_read_position_lets_what_it_read_start() -> None:
    """What a take-over reads again waits until the reading is back where the previous owner
    had read to (streams/worker/inbox.py, `_parked`); a log that ends before that (truncated,
    or emptied by retention) would hold it until another record came: it ends the replay."""
    records: list[Record] = [ex("small", 0)]
    stack = Stack.of({0: records})
    stack.inbox.resume(0, 0, encode_metadata([0, 5], 10))
    stack.turn()  # reads offset 0: held back, the replay has 9 more offsets to read
    assert stack.inbox.replaying() == []  # the settle ended it: position 1 = the log's end
    assert stack.running({}, T_MS) == [records[0].execution_id]


def test_a_replay_still_reading_holds_back_what_it_read() -> None:
    records: list[Record] = [ex("small", n) for n in range(20)]
    stack = Stack.of({0: records})
    stack.inbox.resume(0, 0, encode_metadata([0, 5], 10))
    stack.turn(limit=3)
    assert stack.inbox.replaying() == [(0, 10)]
    assert stack.running({}, T_MS) == []
    stack.turn(limit=7)  # back at 10: what it read again (0 and 5) may start
    assert stack.running({}, T_MS) == [records[0].execution_id, records[5].execution_id]


def test_a_revocation_drops_a_claim_ahead_read_before_it_not_one_read_after_it() -> None:
    """A take-over reads old revocations again; a claim ahead of the same execution read
    after the revocation (dispatched again once its job resumed) is not dropped by it."""
    settings = KadenceSettings(worker_concurrency=8)
    inbox = Inbox()
    holdings = Holdings(settings, "w", inbox)
    target = ex("small", 1, due_s=1)
    holdings.saw(inbox.add(0, 5, target).execution)  # type: ignore[union-attr]
    txn = TxnWork()
    holdings.claim_ahead(txn, T_MS, {}, set())
    holdings.committed(txn)
    assert list(holdings.claimed) == [target.execution_id]
    holdings.revoke(revoked(target), 0, 3)  # read before the claim's record: not its
    assert list(holdings.claimed) == [target.execution_id]
    holdings.revoke(revoked(target), 0, 6)
    assert holdings.claimed == {}
