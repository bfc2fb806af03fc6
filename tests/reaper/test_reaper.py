"""The reaper's lease table on an in-memory task: expiry, redelivery, the cap, stale events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kadence.clock import datetime_to_ms
from kadence.codec import Codec
from kadence.models import (
    Decision,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    LeaseEvent,
    LeaseEventKind,
    OutcomeStatus,
    Rejected,
)
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.reaper.leases import LEASE_GRACE_MS
from streams.reaper.processor import ReaperConfig, ReaperProcessor
from streams.runtime.records import InputRecord
from streams.runtime.store import MemoryStore
from streams.runtime.task import Task

CODEC = Codec()
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T_MS = datetime_to_ms(T)
TTL = 3_000
EX = ExecutionRequested(
    execution_id="acme/j@2026-12-01T09:00:00.000Z",
    tenant="acme",
    job_id="j",
    definition_version=1,
    nominal_at=T,
    due_at=T,
    dispatched_at=T,
    target=KafkaTarget(topic="t"),
    timeout_ms=60_000,
    lease_ttl_ms=TTL,
)


class Harness:
    def __init__(self, cap: int = 3) -> None:
        self.topics = Topics(KadenceSettings(partitions=1))
        self.proc = ReaperProcessor(ReaperConfig(self.topics, 1, 1, redelivery_cap=cap), CODEC)
        self.task = Task(0, MemoryStore(), T_MS, 60_000)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *a: self.out.append(a)
        self.task.changelog = self.topics.reaper_changelog
        self.offset = 0

    def event(
        self, kind: LeaseEventKind, at_ms: int, delivery: int = 1, worker: str = "w1"
    ) -> None:
        at = T + timedelta(milliseconds=at_ms - T_MS)
        ev = LeaseEvent(
            execution_id=EX.execution_id,
            tenant="acme",
            job_id="j",
            attempt=1,
            delivery=delivery,
            worker_id=worker,
            event=kind,
            at=at,
            expires_at=at + timedelta(milliseconds=TTL),
            execution=EX.model_copy(update={"delivery": delivery})
            if kind is LeaseEventKind.acquired
            else None,
        )
        self.raw(CODEC.encode(ev), at_ms)

    def raw(self, value: bytes, at_ms: int) -> None:
        self.offset += 1
        rec = InputRecord(
            self.topics.leases, 0, self.offset, EX.execution_id.encode(), value, [], at_ms
        )
        self.proc.process(self.task, rec, at_ms)
        self.commit()

    def tick(self, now_ms: int) -> None:
        for key in self.task.due(now_ms, 100):
            self.proc.fire(self.task, key, now_ms)
        self.commit()

    def commit(self) -> None:
        self.task.committed(None)  # as the runner does (a timer set beyond the window is
        # then only in the store's due index, not also in the wheel: due once, not twice)

    def records(self, kind: type[Any]) -> list[Any]:
        got = []
        for topic, _p, _k, value, _h in self.out:
            if topic == self.topics.reaper_changelog or value is None:
                continue
            record = CODEC.decode(value)
            if isinstance(record, kind):
                got.append(record)
        return got


def test_a_renewed_lease_is_left_alone() -> None:
    h = Harness()
    h.event(LeaseEventKind.acquired, T_MS)
    for i in range(1, 10):  # renewed every second for 9 s
        h.tick(T_MS + i * 1_000)
        h.event(LeaseEventKind.renewed, T_MS + i * 1_000)
    h.tick(T_MS + 10_000)
    h.event(LeaseEventKind.released, T_MS + 10_500)
    h.tick(T_MS + 60_000)
    assert h.records(ExecutionRequested) == []
    assert h.task.get(EX.execution_id.encode()) is None  # released: forgotten


def test_an_expired_lease_is_redelivered_with_the_same_id_and_the_next_delivery() -> None:
    h = Harness()
    h.event(LeaseEventKind.acquired, T_MS)
    h.tick(T_MS + TTL + LEASE_GRACE_MS - 1)
    assert h.records(ExecutionRequested) == []  # not before expiry plus grace
    h.tick(T_MS + TTL + LEASE_GRACE_MS)
    [again] = h.records(ExecutionRequested)
    assert (again.execution_id, again.delivery, again.trigger) == (EX.execution_id, 2, "redelivery")
    [hist] = h.records(HistoryRecord)
    assert hist.decision is Decision.redelivered
    assert "delivery 1 (worker w1) expired" in (hist.reason or "")
    # the first worker wakes up and reports: stale, ignored; the new delivery is tracked
    h.event(LeaseEventKind.renewed, T_MS + 6_000, delivery=1)
    h.event(LeaseEventKind.released, T_MS + 6_000, delivery=1)
    h.event(LeaseEventKind.acquired, T_MS + 6_000, delivery=2, worker="w2")
    h.tick(T_MS + 6_000 + TTL + LEASE_GRACE_MS)
    assert [e.delivery for e in h.records(ExecutionRequested)] == [2, 3]


def sample(h: Harness, name: str) -> float | None:
    return h.proc.metrics.registry.get_sample_value(name)


def test_past_the_cap_the_reaper_gives_up_with_a_non_retryable_outcome() -> None:
    h = Harness(cap=2)
    h.event(LeaseEventKind.acquired, T_MS)
    h.tick(T_MS + 10_000)
    h.event(LeaseEventKind.acquired, T_MS + 11_000, delivery=2)
    h.tick(T_MS + 20_000)
    assert [e.delivery for e in h.records(ExecutionRequested)] == [2]
    [outcome] = h.records(ExecutionOutcome)
    assert (outcome.status, outcome.retryable, outcome.delivery) == (OutcomeStatus.failed, False, 2)
    assert outcome.error is not None
    assert outcome.error.type == "RedeliveryCap"
    assert sample(h, "kadence_reaper_lease_expiries_total") == 2
    assert sample(h, "kadence_reaper_redeliveries_total") == 1
    assert sample(h, "kadence_reaper_redelivery_cap_reached_total") == 1


def test_garbage_on_the_leases_topic_is_rejected_and_the_reaper_goes_on() -> None:
    h = Harness()
    h.raw(b"\x00garbage", T_MS)
    [rejected] = h.records(Rejected)
    assert rejected.code == "garbage_bytes"
    h.event(LeaseEventKind.acquired, T_MS)
    h.tick(T_MS + 10_000)
    assert len(h.records(ExecutionRequested)) == 1


def test_a_replay_of_a_run_given_up_at_the_cap_is_guarded_again() -> None:
    """Issue 17, item 7: the reaper remembers a run it gave up on for a day to ignore stale
    events; the replay of its dead letter (same execution id, delivery 1, dispatched later)
    was one of them, so it ran unguarded: a worker dying in it lost it silently."""
    h = Harness(cap=1)
    h.event(LeaseEventKind.acquired, T_MS)
    h.tick(T_MS + 10_000)  # expired at the cap: given up
    assert len(h.records(ExecutionOutcome)) == 1
    h.out.clear()
    replayed = T + timedelta(minutes=5)
    ev = LeaseEvent(
        execution_id=EX.execution_id, tenant="acme", job_id="j", attempt=1, delivery=1,
        worker_id="w2", event=LeaseEventKind.acquired, at=replayed,
        expires_at=replayed + timedelta(milliseconds=TTL),
        execution=EX.model_copy(update={"dispatched_at": replayed, "trigger": "replay"}),
    )  # fmt: skip
    h.raw(CODEC.encode(ev), T_MS + 300_000)
    h.tick(T_MS + 300_000 + TTL + LEASE_GRACE_MS)  # its worker died too
    [outcome] = h.records(ExecutionOutcome)
    assert outcome.error is not None
    assert outcome.error.type == "RedeliveryCap"
    # an `acquired` of the first dispatch, arriving late, is still stale
    h.out.clear()
    h.event(LeaseEventKind.acquired, T_MS + 301_000)
    h.tick(T_MS + 400_000)
    assert h.records(ExecutionOutcome) == []
