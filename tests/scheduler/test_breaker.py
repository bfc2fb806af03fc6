"""The per-tenant retry circuit breaker: pure transitions, then through the processor."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    Decision,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    ScheduleDefinition,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, Store
from streams.runtime.task import Task
from streams.scheduler.breaker import Breaker, BreakerConfig, after_outcome
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from tests.scheduler.test_domain import T0
from tests.scheduler.test_domain import outcome as make_outcome

CFG = BreakerConfig(failure_ratio=0.5, min_attempts=4, window_ms=60_000, cooldown_ms=10_000)
CODEC = Codec()


def test_opens_on_the_failure_ratio_and_closes_on_a_successful_probe() -> None:
    b = Breaker()
    outcomes = [True, False, False, False, True]  # failed?
    assert [b.record(f"e{i}", f, T0 + i, CFG) for i, f in enumerate(outcomes)] == [None] * 5
    assert b.gate(T0 + 5, CFG).closed  # 2 of 5 failed: below the ratio
    assert b.record("e5", True, T0 + 5, CFG) == "opened"  # 3 of 6: at the ratio
    gate = b.gate(T0 + 6, CFG)
    assert (gate.closed, gate.probe, gate.retry_at_ms) == (False, False, T0 + 5 + 10_000)
    assert "3 of 6 attempts failed" in gate.reason
    probe = b.gate(T0 + 5 + 10_000, CFG)
    assert (probe.closed, probe.probe) == (False, True)
    b = b.probing("p1", T0 + 20_000, 60_000)  # out until its deadline, a minute
    assert not b.gate(T0 + 20_000, CFG).probe  # one probe at a time
    assert b.record("p1", False, T0 + 20_000, CFG) == "closed"
    assert b.gate(T0 + 20_001, CFG).closed


def test_counting_an_outcome_changes_a_copy_never_the_stored_breaker() -> None:
    """`after_outcome` counts in a copy (`Breaker.copy`): the breaker the partition caches is
    the one it stored, and changes only when the copy is written."""
    stored = Breaker(window_start_ms=T0, attempts=3, failures=1, probe="acme/j@p", changed_ms=T0)
    before = stored.dump()
    at = ms_to_datetime(T0)
    run = {"execution_id": "acme/j@x", "tenant": "acme", "job_id": "j", "attempt": 1}
    times = {"nominal_at": at, "due_at": at, "started_at": at, "finished_at": at}
    for status in (OutcomeStatus.failed, OutcomeStatus.succeeded):
        ended = ExecutionOutcome(**run, **times, delivery=1, worker_id="w", status=status)
        counted = after_outcome(stored, ended, T0 + 1, BreakerConfig())
        assert counted is not None
        copy, _ = counted
        assert copy is not stored and stored.dump() == before
        assert (copy.attempts, copy.probe, copy.changed_ms) == (4, "acme/j@p", T0)
    assert stored.copy() == stored and stored.copy() is not stored


def test_a_failed_probe_opens_it_again_and_a_new_window_forgets() -> None:
    b = Breaker(open_until_ms=T0, probe="p1", attempts=9, failures=9)
    assert b.record("p1", True, T0 + 1, CFG) == "opened"
    assert b.gate(T0 + 2, CFG).retry_at_ms == T0 + 1 + 10_000
    fresh = Breaker(window_start_ms=T0, attempts=3, failures=3)
    fresh.record("x", True, T0 + 60_000, CFG)  # the window rolled over: 1 of 1
    assert (fresh.attempts, fresh.failures, fresh.open_until_ms) == (1, 1, None)
    assert Breaker.load(b.dump()) == b


class Scheduler:
    """The scheduler processor on a task over `store`, with commits."""

    def __init__(self, store: Store, breaker: BreakerConfig = CFG, **cfg_kw: Any) -> None:
        self.topics = Topics(KadenceSettings(partitions=1))
        cfg = SchedulerConfig(self.topics, 1, 1, "2025b", breaker=breaker, **cfg_kw)
        self.proc = SchedulerProcessor(cfg, CODEC)
        self.task = Task(0, store, T0, 60_000)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *a: self.out.append(a)
        self.task.changelog = self.topics.scheduler_changelog
        self.offset = 0

    def feed(self, topic: str, key: str, value: bytes | None, now: int) -> None:
        self.offset += 1
        self.proc.process(
            self.task, InputRecord(topic, 0, self.offset, key.encode(), value, [], now), now
        )
        self._commit()

    def tick(self, now: int) -> None:
        for key in self.task.due(now, 1000):
            self.proc.fire(self.task, key, now)
        self._commit()

    def _commit(self) -> None:
        self.task.store.apply(self.task.batch)
        self.task.batch = Batch()

    def take(self, kind: type[Any]) -> list[Any]:
        got = [
            CODEC.decode(v)
            for (t, _p, _k, v, _h) in self.out
            if t != self.topics.scheduler_changelog and v is not None
        ]
        return [r for r in got if isinstance(r, kind)]


def test_a_failing_tenant_s_retries_pause_and_resume_after_a_probe(store: Store) -> None:
    s = Scheduler(store)
    for i in range(5):
        d = ScheduleDefinition(
            tenant="acme",
            job_id=f"j{i}",
            version=1,
            schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"},
            target=KafkaTarget(topic="o"),
            retry={"max_attempts": 5, "initial_backoff_ms": 1_000, "jitter": "none"},
        )
        s.feed(s.topics.schedules, d.key, CODEC.encode(d), T0)
    due = T0 + 60_000
    s.tick(due)
    fired = s.take(ExecutionRequested)
    assert len(fired) == 5

    def outcome(ex: ExecutionRequested, ok: bool, now: int) -> None:
        status = OutcomeStatus.succeeded if ok else OutcomeStatus.failed
        o = make_outcome(ex, status, retryable=True)
        s.feed(s.topics.outcomes, ex.key, CODEC.encode(o), now)

    for ex in fired:  # all five fail: 5 of 5 >= 50 %, the circuit opens
        outcome(ex, False, due + 100)
    s.out.clear()
    s.tick(due + 1_100)  # the retries are due now, but the circuit is open
    assert s.take(ExecutionRequested) == []
    paused = [h for h in s.take(HistoryRecord) if h.decision is Decision.circuit_open]
    assert len(paused) == 5
    assert "tenant circuit open" in (paused[0].reason or "")
    s.out.clear()
    s.tick(due + 100 + 10_000)  # cool-down over: exactly one probe
    [probe] = s.take(ExecutionRequested)
    assert probe.attempt == 2
    s.out.clear()
    outcome(probe, True, due + 10_500)  # the probe succeeds: the circuit closes
    s.tick(due + 100 + 2 * 10_000)
    assert len(s.take(ExecutionRequested)) == 4  # the rest run again


def _probe_out(s: Scheduler) -> tuple[ExecutionRequested, int]:
    """Five jobs of one tenant fail, the circuit opens, and after the cool-down one retry is
    out as the probe; returns it and the time."""
    for i in range(5):
        d = ScheduleDefinition(
            tenant="acme",
            job_id=f"j{i}",
            version=1,
            schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"},
            target=KafkaTarget(topic="o"),
            retry={"max_attempts": 5, "initial_backoff_ms": 1_000, "jitter": "none"},
            timeout_ms=60_000,
            lease_ttl_ms=10_000,
        )
        s.feed(s.topics.schedules, d.key, CODEC.encode(d), T0)
    due = T0 + 60_000
    s.tick(due)
    for ex in s.take(ExecutionRequested):
        o = make_outcome(ex, OutcomeStatus.failed, retryable=True)
        s.feed(s.topics.outcomes, ex.key, CODEC.encode(o), due + 100)
    s.tick(due + 1_100)
    now = due + 100 + 10_000
    s.out.clear()
    s.tick(now)
    [probe] = s.take(ExecutionRequested)
    s.out.clear()
    return probe, now


def _retries_fired(s: Scheduler, now: int) -> list[ExecutionRequested]:
    s.out.clear()
    s.tick(now)
    return [e for e in s.take(ExecutionRequested) if e.attempt > 1]


def test_a_cancelled_probe_lets_a_new_probe_go(store: Store) -> None:
    """Issue 17, item 8: on main a cancelled probe held the tenant's retries forever."""
    s = Scheduler(store)
    probe, now = _probe_out(s)
    cancelled = make_outcome(probe, OutcomeStatus.cancelled)
    s.feed(s.topics.outcomes, probe.key, CODEC.encode(cancelled), now + 500)
    [again] = _retries_fired(s, now + 10_000)  # the next look: one new probe, not all four
    assert again.execution_id != probe.execution_id


def test_the_outcome_of_a_deleted_job_s_probe_still_closes_the_circuit(store: Store) -> None:
    s = Scheduler(store)
    probe, now = _probe_out(s)
    s.feed(s.topics.schedules, probe.key, None, now + 100)  # deleted while its probe runs
    assert s.task.get(probe.key.encode()) is None
    ok = make_outcome(probe, OutcomeStatus.succeeded)
    s.feed(s.topics.outcomes, probe.key, CODEC.encode(ok), now + 500)
    assert len(_retries_fired(s, now + 10_000)) == 4  # closed: the four others' retries run


def test_a_probe_that_never_answers_is_replaced_after_its_deadline(store: Store) -> None:
    s = Scheduler(store)
    probe, now = _probe_out(s)
    assert _retries_fired(s, now + 10_000) == []  # still waiting for it
    deadline = now + 60_000 + 10_000 + 10_000  # its timeout, lease and the cool-down
    [again] = _retries_fired(s, deadline + 10_000)
    assert again.execution_id != probe.execution_id


def test_the_tenant_has_one_circuit_across_scheduler_partitions() -> None:
    """Issue 17, item 8: the circuit was per tenant per scheduler partition, so a tenant whose
    failures were counted on one partition kept retrying at full speed from the others. An
    open or a close now reaches every partition (TenantCircuit); a partition that changed its
    own copy later keeps it."""
    from tests.scheduler.test_moving import PARTITIONS, Partitions  # noqa: PLC0415

    s = Partitions(breaker=CFG)
    homes: dict[int, list[ScheduleDefinition]] = {p: [] for p in range(PARTITIONS)}
    for i in range(40):
        d = ScheduleDefinition(
            tenant="acme", job_id=f"j{i}", version=1, target=KafkaTarget(topic="o"),
            schedule={"kind": "once", "run_at": "2026-12-01T09:01:00Z"},
            retry={"max_attempts": 5, "initial_backoff_ms": 1_000, "jitter": "none"},
        )  # fmt: skip
        p = partition_for(d.routing_key, PARTITIONS)
        homes[p].append(d)
        s.feed(s.topics.schedules, p, d.key.encode(), CODEC.encode(d))
    s.tick(T0 + 60_000)
    fired = s.take(ExecutionRequested)
    failing, healthy = 0, 1
    on = {
        p: [e for e in fired if partition_for(f"acme/{e.job_id}", PARTITIONS) == p] for p in (0, 1)
    }
    s.now = T0 + 61_000
    for ex in on[healthy][:2]:  # the healthy partition sees failures too, below the minimum
        s.feed(
            s.topics.outcomes,
            healthy,
            ex.key.encode(),
            CODEC.encode(make_outcome(ex, OutcomeStatus.failed, retryable=True)),
        )
    for ex in on[failing][:4]:  # 4 of 4 failed here: it opens, and tells the other partition
        s.feed(
            s.topics.outcomes,
            failing,
            ex.key.encode(),
            CODEC.encode(make_outcome(ex, OutcomeStatus.failed, retryable=True)),
        )
    told = [m for m in s.inbox if m[0] == healthy]
    assert len(told) == 1
    s.deliver()
    s.out.clear()
    s.tick(T0 + 62_500)  # the healthy partition's retries are due: they wait for the circuit
    got = s.take(object)  # (take empties what the partitions wrote)
    assert [r for r in got if isinstance(r, ExecutionRequested)] == []
    held = [h for h in got if isinstance(h, HistoryRecord) and h.decision is Decision.circuit_open]
    assert {e.job_id for e in on[healthy][:2]} <= {h.job_id for h in held}  # on main: they ran
    # after the cool-down one probe per partition may go; the failing one's succeeds
    s.tick(T0 + 72_000)
    probes = s.take(ExecutionRequested)
    probe = next(e for e in probes if partition_for(f"acme/{e.job_id}", PARTITIONS) == failing)
    s.feed(
        s.topics.outcomes,
        failing,
        probe.key.encode(),
        CODEC.encode(make_outcome(probe, OutcomeStatus.succeeded)),
    )
    s.deliver()  # closed everywhere
    s.out.clear()
    s.tick(T0 + 90_000)
    retried = {e.job_id for e in s.take(ExecutionRequested)}
    assert retried >= {e.job_id for e in on[failing][:4]} - {probe.job_id}
    ran = retried | {e.job_id for e in probes}
    assert {e.job_id for e in on[healthy][:2]} <= ran  # the closed circuit let them go too


def test_a_change_heard_from_another_partition_applies_unless_this_copy_changed_later() -> None:
    b = Breaker()
    assert b.heard(T0 + 30_000, T0) == "opened (as another partition)"
    assert not b.gate(T0 + 1, CFG).closed
    assert b.heard(T0 + 20_000, T0 + 1) is None  # opens no longer than it is already open
    assert b.heard(None, T0 + 2) == "closed (as another partition)"
    assert b.gate(T0 + 3, CFG).closed
    for i in range(4):  # this copy opens itself later ...
        b.record(f"e{i}", True, T0 + 10 + i, CFG)
    assert not b.gate(T0 + 20, CFG).closed
    assert b.heard(None, T0 + 5) is None  # ... so an older close heard now does not apply
    assert not b.gate(T0 + 20, CFG).closed
    assert Breaker.load(b.dump()) == b
    assert b"changed_ms" not in Breaker().dump()  # what a previous release reads


@given(
    breaker=st.builds(
        Breaker,
        window_start_ms=st.integers(T0 - 120_000, T0),
        attempts=st.integers(0, 12),
        failures=st.integers(0, 12),
        open_until_ms=st.none() | st.integers(T0 - 20_000, T0 + 20_000),
        probe=st.none() | st.sampled_from(["e1", "e2"]),
        changed_ms=st.integers(0, T0),
    ),
    eid=st.sampled_from(["e1", "e2", "e3"]),
    now=st.integers(T0, T0 + 70_000),
)
def test_a_quiet_success_is_counted_in_place_exactly_when_record_changes_nothing_else(
    breaker: Breaker, eid: str, now: int
) -> None:
    """`count_quiet_success` (a batch's quiet successes, streams/scheduler/together.py) counts
    what `record` counts, in place, and only when `record` would report no change."""
    recorded = breaker.copy()
    change = recorded.record(eid, False, now, CFG)
    in_place = breaker.copy()
    quiet = in_place.count_quiet_success(eid, now, CFG)
    assert quiet == (change is None)
    assert in_place == (recorded if quiet else breaker)
