"""Moving a job between scheduler partitions (a new concurrency key) through two processors:
the partition that receives the new version tells the others (`JobMoved`), the highest
version keeps the job and every other copy is removed, so exactly one copy fires (issue 17,
item 5; docs/decisions/0003)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    Decision,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    HttpTarget,
    JobMoved,
    KafkaTarget,
    OutcomeStatus,
    Rejected,
    ReplayDeadLetter,
    ScheduleDefinition,
    TenantCircuit,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler.breaker import DEFAULTS, BreakerConfig
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from streams.scheduler.stored import definition_key
from tests.scheduler.test_domain import MIN, T0
from tests.scheduler.test_domain import outcome as make_outcome

CODEC = Codec()
PARTITIONS = 2


def key_on(partition: int) -> str:
    """A concurrency key whose group lands on `partition`."""
    return next(
        k
        for k in (f"g{i}" for i in range(100))
        if partition_for(f"acme/~{k}", PARTITIONS) == partition
    )


class Partitions:
    """The scheduler's partitions, each a processor over its own task; records a processor
    writes to `scheduler-control` are delivered to the partition they name, as the broker would."""

    def __init__(self, breaker: BreakerConfig = DEFAULTS) -> None:
        self.topics = Topics(KadenceSettings(partitions=PARTITIONS))
        cfg = SchedulerConfig(self.topics, PARTITIONS, 1, "2025b", breaker=breaker)
        self.procs = [SchedulerProcessor(cfg, CODEC) for _ in range(PARTITIONS)]
        self.tasks = [Task(p, MemoryStore(), T0, 60_000) for p in range(PARTITIONS)]
        self.out: list[tuple[Any, ...]] = []
        self.inbox: list[tuple[int, bytes, bytes]] = []
        for task in self.tasks:
            task._emit = self._emitted
            task.changelog = self.topics.scheduler_changelog
        self.offset = 0
        self.now = T0

    def _emitted(
        self, topic: str, partition: int | None, key: bytes | None, value: bytes | None, h: Any
    ) -> None:
        if topic == self.topics.scheduler_control:
            assert partition is not None and key is not None and value is not None
            self.inbox.append((partition, key, value))
        self.out.append((topic, partition, key, value, h))

    def feed(self, topic: str, partition: int, key: bytes, value: bytes | None) -> None:
        self.offset += 1
        record = InputRecord(topic, partition, self.offset, key, value, [], self.now)
        self.procs[partition].process(self.tasks[partition], record, self.now)
        self._commit(partition)

    def deliver(self) -> None:
        """Deliver what the schedulers wrote to one another, until nothing more is written."""
        while self.inbox:
            partition, key, value = self.inbox.pop(0)
            self.feed(self.topics.scheduler_control, partition, key, value)

    def define(self, version: int, concurrency_key: str | None = None) -> int:
        d = ScheduleDefinition(
            tenant="acme", job_id="j", version=version, target=KafkaTarget(topic="o"),
            schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * *"},
            concurrency_key=concurrency_key, overlap="allow",
        )  # fmt: skip
        partition = partition_for(d.routing_key, PARTITIONS)
        self.feed(self.topics.schedules, partition, d.key.encode(), CODEC.encode(d))
        return partition

    def tick(self, now: int) -> None:
        self.now = now
        for p, task in enumerate(self.tasks):
            for key in task.due(now, 1000):
                self.procs[p].fire(task, key, now)
            self._commit(p)

    def _commit(self, partition: int) -> None:
        task = self.tasks[partition]
        task.store.apply(task.batch)
        task.batch = Batch()

    def take(self, kind: type[Any]) -> list[Any]:
        got = [
            CODEC.decode(v)
            for (t, _p, _k, v, *_h) in self.out
            if t != self.topics.scheduler_changelog and v is not None
        ]
        self.out.clear()
        return [r for r in got if isinstance(r, kind)]

    def copies(self) -> list[int]:
        """The partitions holding a copy of the job (a copy removed leaves no definition)."""
        held = [p for p, task in enumerate(self.tasks) if task.get(b"acme/j") is not None]
        defined = [p for p, t in enumerate(self.tasks) if t.get(definition_key(b"acme/j"))]
        assert defined == held
        return held


def test_a_new_concurrency_key_moves_the_job_and_only_the_new_copy_fires() -> None:
    s = Partitions()
    home = s.define(1)
    s.tick(T0 + MIN)
    [first] = s.take(ExecutionRequested)
    elsewhere = 1 - home
    s.now = T0 + MIN + 1_000
    assert s.define(2, key_on(elsewhere)) == elsewhere
    assert s.copies() == [0, 1]  # on main, both copies stayed and both fired from then on
    s.deliver()
    assert s.copies() == [elsewhere]
    [removed] = [h for h in s.take(HistoryRecord) if h.decision is Decision.deleted]
    assert f"job moved: version 2 fires from scheduler partition {elsewhere}" in (
        removed.reason or ""
    )
    s.tick(T0 + 2 * MIN)  # one run of the occurrence, from the new copy
    [ex] = s.take(ExecutionRequested)
    assert (ex.definition_version, ex.nominal_at) == (2, ms_to_datetime(T0 + 2 * MIN))
    assert first.definition_version == 1


def test_a_move_with_a_version_not_above_the_current_one_is_undone() -> None:
    s = Partitions()
    home = s.define(3)
    elsewhere = 1 - home
    s.define(2, key_on(elsewhere))  # an older version under a new key: not an update
    s.deliver()
    assert s.copies() == [home]
    [removed] = [h for h in s.take(HistoryRecord) if h.decision is Decision.deleted]
    assert f"version 3 fires from scheduler partition {home}" in (removed.reason or "")
    assert "this copy, version 2, is removed" in (removed.reason or "")


def test_one_version_under_two_keys_leaves_exactly_one_copy() -> None:
    """Both partitions heard of a version above 1 new to them, so both tell the other: on a
    tie the lower partition keeps the job (not both removed, not both kept)."""
    s = Partitions()
    home = s.define(3)
    s.define(3, key_on(1 - home))
    s.deliver()
    assert s.copies() == [0]
    assert len([h for h in s.take(HistoryRecord) if h.decision is Decision.deleted]) == 1


def test_moving_back_before_the_first_move_is_heard_keeps_the_latest() -> None:
    s = Partitions()
    home = s.define(1)
    elsewhere = 1 - home
    s.define(2, key_on(elsewhere))
    held = list(s.inbox)  # the first JobMoved is late
    s.inbox.clear()
    s.define(3)  # moved back home before home heard of version 2
    s.inbox[:0] = held
    s.deliver()
    assert s.copies() == [home]
    s.tick(T0 + MIN)
    assert [ex.definition_version for ex in s.take(ExecutionRequested)] == [3]


def test_what_went_out_ahead_from_the_old_copy_is_revoked() -> None:
    s = Partitions()
    s.procs = [
        SchedulerProcessor(
            SchedulerConfig(s.topics, PARTITIONS, 1, "2025b", dispatch_ahead_ms=30_000), CODEC
        )
        for _ in range(PARTITIONS)
    ]
    home = s.define(1)
    s.tick(T0 + MIN - 20_000)  # dispatched 20 s ahead
    [ahead] = s.take(ExecutionRequested)
    s.define(2, key_on(1 - home))
    s.deliver()
    revoked = s.take(ExecutionRevoked)
    assert [r.execution_id for r in revoked] == [ahead.execution_id]


def test_a_forged_or_stray_job_moved_changes_nothing_it_should_not() -> None:
    s = Partitions()
    home = s.define(5)
    stray = JobMoved(
        tenant="acme", job_id="j", request_id="x", issued_at=ms_to_datetime(T0),
        version=9, partition=home,
    )  # fmt: skip
    s.feed(s.topics.scheduler_control, home, b"acme/j", CODEC.encode(stray))  # its own partition
    assert s.copies() == [home]
    old = stray.model_copy(update={"version": 4, "partition": 1 - home})
    s.feed(s.topics.scheduler_control, home, b"acme/j", CODEC.encode(old))  # older than this
    assert s.copies() == [home]  # kept; it answers the other partition
    s.deliver()
    assert s.copies() == [home]
    wrong_key = stray.model_copy(update={"job_id": "other", "partition": 1 - home})
    s.feed(s.topics.scheduler_control, home, b"acme/j", CODEC.encode(wrong_key))
    assert s.copies() == [home]
    assert all(h.decision is not Decision.deleted for h in s.take(HistoryRecord))


def test_a_run_of_the_old_copy_that_fails_after_the_move_says_it_is_not_retried() -> None:
    s = Partitions()
    home = s.define(1)
    s.tick(T0 + MIN)
    [ex] = s.take(ExecutionRequested)
    s.define(2, key_on(1 - home))
    s.deliver()
    s.take(HistoryRecord)
    failed = make_outcome(ex, OutcomeStatus.failed, retryable=True)
    s.feed(s.topics.outcomes, home, b"acme/j", CODEC.encode(failed))  # routed by its old key
    [said] = s.take(HistoryRecord)
    assert (said.decision, said.execution_id) == (Decision.failed, ex.execution_id)
    assert "it is not retried" in (said.reason or "")
    s.tick(T0 + MIN + 120_000)
    assert all(r.execution_id != ex.execution_id for r in s.take(ExecutionRequested))


def test_a_tenant_circuit_record_keyed_for_another_tenant_is_rejected() -> None:
    """A TenantCircuit whose key is not its tenant (a misrouted one) opens nobody's circuit;
    a `rejected` record says why."""
    s = Partitions()
    forged = TenantCircuit(
        tenant="acme", partition=1, at=ms_to_datetime(T0), open_until=ms_to_datetime(T0 + 60_000)
    )
    s.feed(s.topics.scheduler_control, 0, b"globex", CODEC.encode(forged))
    [rejected] = s.take(Rejected)
    assert rejected.code == "key_mismatch"
    assert s.tasks[0].get(b"~breaker/acme") is None
    assert s.tasks[0].get(b"~breaker/globex") is None


@pytest.mark.parametrize("kind", ["JobMoved", "TenantCircuit", "ReplayDeadLetter"])
def test_control_records_on_the_commands_topic_are_refused_by_name(kind: str) -> None:
    """Anyone who may write `commands` could forge what only Kadence says (issue 28): a
    `JobMoved` with a high version from another partition removed the victim's job, a
    `TenantCircuit` open until 8999 paused the tenant's retries for ever, a replay carrying a
    crafted letter ran any target as the tenant. On `commands` each is refused, changing
    nothing; the same records on `scheduler-control` (no tenant may write it) still work."""
    s = Partitions()
    home = s.define(5)
    forged: Any
    if kind == "JobMoved":
        forged = JobMoved(
            tenant="acme", job_id="j", request_id="evil", issued_at=ms_to_datetime(T0),
            version=99, partition=1 - home,
        )  # fmt: skip
        key = b"acme/j"
    elif kind == "TenantCircuit":
        forged = TenantCircuit(
            tenant="acme", partition=1 - home, at=ms_to_datetime(T0),
            open_until=datetime(8999, 1, 1, tzinfo=UTC),
        )  # fmt: skip
        key = b"acme"
    else:
        at = ms_to_datetime(T0)
        letter = ExecutionRequested(
            execution_id="acme/j@x1", tenant="acme", job_id="j", definition_version=5,
            nominal_at=at, due_at=at, dispatched_at=at, timeout_ms=1000, lease_ttl_ms=30_000,
            target=HttpTarget(url="https://attacker.example/x"),
        )  # fmt: skip
        forged = ReplayDeadLetter(
            tenant="acme", job_id="j", request_id="evil", issued_at=ms_to_datetime(T0),
            execution_id="acme/j@x1", letter=letter,
        )  # fmt: skip
        key = b"acme/j"
    s.feed(s.topics.commands, home, key, CODEC.encode(forged))
    s.deliver()
    [rejected] = s.take(Rejected)
    assert rejected.code == "control_record"
    assert s.topics.scheduler_control in rejected.reason
    assert s.copies() == [home]
    assert s.tasks[home].get(b"~breaker/acme") is None
    s.tick(T0 + MIN)
    fired = s.take(ExecutionRequested)
    assert [r.target for r in fired] == [KafkaTarget(topic="o")]  # the job's own run only
    # the same record where only Kadence writes is heard
    s.feed(s.topics.scheduler_control, home, key, CODEC.encode(forged))
    s.deliver()
    assert not s.take(Rejected)
