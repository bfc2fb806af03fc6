"""A worker's batch of outcomes taken as one unit of work (`process_together`, together.py)
does what taking each outcome as a unit of its own does: the same records, job states, waiting
successes, breakers and counts of runs in progress, for any mix of successes, failures, lost
leases, duplicates and outcomes of jobs that are gone; and what a run of quiet successes
shares (a tenant's facts, its breaker copy) is made once, not once an outcome."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from kadence.batches import executions_in
from kadence.codec import Codec
from kadence.models import (
    CronSchedule,
    ExecutionOutcome,
    ExecutionOutcomes,
    ExecutionRequested,
    KafkaTarget,
    OutcomeStatus,
    OverlapPolicy,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler import later
from streams.scheduler.breaker import Breaker, BreakerConfig
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from streams.scheduler.tenant_limits import TenantRuns
from tests.scheduler.test_domain import T0
from tests.scheduler.test_domain import outcome as make_outcome

CODEC = Codec()
AHEAD_MS = 5_000
TENANTS = ("acme", "beta", "capped")
"""`capped` has a cap on its runs in progress (its facts are made for each success), `beta` one
on its runs a second."""
JOBS = [(t, f"j{i}") for t in TENANTS for i in range(2)] + [("acme", "skip")]
"""Two per-second jobs a tenant, and one whose overlap policy keeps its successes from waiting."""
BREAKER = BreakerConfig(failure_ratio=0.5, min_attempts=4, window_ms=60_000, cooldown_ms=2_000)
"""Few attempts open it: a batch's failures open a circuit, and a success may close one."""


def _raise(exc: Exception) -> None:
    raise exc


class Side:
    """The scheduler processor on an in-memory task, its jobs defined and fired ahead."""

    def __init__(self) -> None:
        self.topics = Topics(KadenceSettings(partitions=1))
        cfg = SchedulerConfig(
            self.topics,
            1,
            1,
            "2025b",
            dispatch_ahead_ms=AHEAD_MS,
            write_behind=True,
            breaker=BREAKER,
            tenant_in_flight_by_tenant={"capped": 1_000},
            tenant_fires_by_tenant={"beta": 3},
        )
        self.proc = SchedulerProcessor(cfg, CODEC)
        self.task = Task(0, MemoryStore(), T0, 60_000)
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *a: self.out.append(a)
        self.task.changelog = self.topics.scheduler_changelog
        self.offset = 0
        for tenant, job in JOBS:
            d = ScheduleDefinition(
                tenant=tenant,
                job_id=job,
                version=1,
                schedule=CronSchedule(expression="* * * * * *"),
                target=KafkaTarget(topic="o"),
                overlap=OverlapPolicy.skip if job == "skip" else OverlapPolicy.allow,
                retry={"max_attempts": 3, "initial_backoff_ms": 1_000, "jitter": "none"},
            )
            self.record(self.topics.schedules, d.key.encode(), CODEC.encode(d), T0)
        self.commit()

    def record(self, topic: str, key: bytes | None, value: bytes, now: int) -> None:
        self.offset += 1
        record = InputRecord(topic, 0, self.offset, key, value, [], now)
        assert self.task.attempt(partial(self.proc.process, self.task, record, now), _raise)

    def fire(self, now: int) -> list[ExecutionRequested]:
        start = len(self.out)
        for key in self.task.due(now, 1_000):
            assert self.task.attempt(partial(self.proc.fire, self.task, key, now), _raise)
        self.commit()
        return [
            ex
            for (t, _p, _k, v, _h) in self.out[start:]
            if t == self.topics.executions
            for ex in executions_in(CODEC, CODEC.decode(v))
        ]

    def batch(self, outcomes: list[ExecutionOutcome], now: int, *, together: bool) -> None:
        """One worker's record of `outcomes`, split as the runtime splits it, then taken as
        one unit (`together`) or each outcome as a unit of its own."""
        self.offset += 1
        value = CODEC.encode(ExecutionOutcomes(outcomes=outcomes))
        units = self.proc.split(
            InputRecord(self.topics.outcomes, 0, self.offset, None, value, [], now)
        )
        task, proc = self.task, self.proc
        if together:
            assert task.attempt(partial(proc.process_together, task, units, now), _raise)
            return
        for unit in units:
            task.attempt(
                partial(proc.process, task, unit, now), partial(proc.refuse, task, unit, now_ms=now)
            )

    def commit(self) -> None:
        self.task.changelog_records()
        self.task.store.apply(self.task.batch)
        self.task.batch = Batch()
        self.task.committed(self.offset)

    def seen(self) -> dict[str, Any]:
        """What taking the outcomes left: the records, the open batch, the kept values (as
        they would be written), every job's newest state (waiting successes caught up), and
        the deferred count."""
        task = self.task
        return {
            "out": list(self.out),
            "batch": dict(task.batch.values),
            "kept": {k: encode(v) for k, (v, encode) in task.kept.items()},
            "jobs": {
                f"{t}/{j}": later.current(self.proc.store.decoded(task, f"{t}/{j}".encode()))
                or task.get(f"{t}/{j}".encode())
                for t, j in JOBS
            },
            "deferred": self.proc.metrics.deferred._value.get(),
        }


STATUSES = {
    "mostly successes": [OutcomeStatus.succeeded] * 6 + [OutcomeStatus.failed],
    "mixed": [OutcomeStatus.succeeded, OutcomeStatus.failed, OutcomeStatus.lease_lost],
}


@st.composite
def batches(draw: st.DrawFn, runs: list[ExecutionRequested]) -> list[ExecutionOutcome]:
    """Outcomes of the runs sent out (some twice, some of another attempt), and of a job that
    is gone; mostly successes."""
    picked = draw(st.lists(st.sampled_from(runs), min_size=1, max_size=40))
    mix = draw(st.sampled_from(sorted(STATUSES)))
    event(mix)
    found = []
    for ex in picked:
        status = draw(st.sampled_from(STATUSES[mix]))
        o = make_outcome(ex, status, retryable=True)
        if draw(st.integers(0, 9)) == 0:  # an attempt the scheduler did not send
            o = o.model_copy(update={"attempt": o.attempt + 1})
        found.append(o)
    if draw(st.booleans()):
        gone = make_outcome(runs[0], OutcomeStatus.succeeded).model_copy(
            update={"job_id": "gone", "execution_id": runs[0].execution_id.replace("/", "/g", 1)}
        )
        found.insert(draw(st.integers(0, len(found))), gone)
    return found


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), lag=st.integers(0, 2_500))
def test_a_batch_taken_as_one_unit_does_what_one_unit_an_outcome_does(
    data: st.DataObject, lag: int
) -> None:
    sides = Side(), Side()
    now = T0 + 1_000
    runs, again = (s.fire(now) for s in sides)
    assert runs and runs == again
    for round_ in range(2):
        outcomes = data.draw(batches(runs), label=f"batch {round_}")
        now += lag
        for side, together in zip(sides, (True, False), strict=True):
            side.out.clear()
            side.batch(outcomes, now, together=together)
        one, each = (s.seen() for s in sides)
        assert one == each
        event(f"deferred in the batch: {'some' if one['deferred'] else 'none'}")
        opened = any(t == sides[0].topics.scheduler_control for t, *_ in one["out"])
        event(f"a circuit opened or closed: {opened}")
        for s in sides:
            s.commit()
        now += 1_000
        fired = [s.fire(now) for s in sides]  # the waiting successes fold alike
        assert fired[0] == fired[1]
        assert sides[0].seen() == sides[1].seen()
        runs = runs + fired[0]


def test_a_run_of_quiet_successes_makes_each_tenants_facts_and_breaker_copy_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twelve successes of three tenants: the facts of the two tenants without a cap on runs
    in progress are made once each (the capped tenant's for each of its four), and each
    tenant's breaker is copied once and counted in place after that."""
    side = Side()
    runs = side.fire(T0 + 1_000)
    quiet = [ex for ex in runs if ex.job_id != "skip"]
    picked = [next(ex for ex in quiet if ex.tenant == t and ex.job_id == j) for t, j in JOBS[:6]]
    picked += [ex for ex in quiet if ex not in picked and ex.job_id in ("j0", "j1")][:6]
    assert len(picked) == 12
    loads: list[str] = []
    copies: list[Breaker] = []
    load, copy = TenantRuns.load, Breaker.copy

    def counted_load(runs: TenantRuns, ctx: Any, tenant: str, now_ms: int) -> Any:
        loads.append(tenant)
        return load(runs, ctx, tenant, now_ms)

    def counted_copy(breaker: Breaker) -> Breaker:
        copies.append(breaker)
        return copy(breaker)

    monkeypatch.setattr(TenantRuns, "load", counted_load)
    monkeypatch.setattr(Breaker, "copy", counted_copy)
    side.batch(
        [make_outcome(ex, OutcomeStatus.succeeded) for ex in picked], T0 + 1_050, together=True
    )
    assert side.proc.metrics.deferred._value.get() == 12  # every one waits (later.py)
    capped = sum(ex.tenant == "capped" for ex in picked)
    assert sorted(loads) == sorted(["acme", "beta"] + ["capped"] * capped)
    assert len(copies) == 3
    kept = {
        k: Breaker.load(encode(v))
        for k, (v, encode) in side.task.kept.items()
        if k.startswith(b"~breaker/")
    }
    assert {k: b.attempts for k, b in kept.items()} == {
        b"~breaker/" + t.encode(): sum(ex.tenant == t for ex in picked) for t in TENANTS
    }


def test_an_outcome_applied_at_once_makes_the_facts_of_the_successes_after_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure in a run of one tenant's quiet successes is applied at once (it schedules a
    retry; what such an outcome writes may start runs or hold places): the successes after it
    are judged with the tenant's facts made again, not with those made before it."""
    side = Side()
    runs = [ex for ex in side.fire(T0 + 1_000) if ex.tenant == "acme" and ex.job_id != "skip"]
    j0 = [ex for ex in runs if ex.job_id == "j0"]
    j1 = [ex for ex in runs if ex.job_id == "j1"]
    assert len(j0) >= 4 and j1
    batch = [make_outcome(ex, OutcomeStatus.succeeded) for ex in j0[:2]]
    batch += [make_outcome(j1[0], OutcomeStatus.failed, retryable=True)]
    batch += [make_outcome(ex, OutcomeStatus.succeeded) for ex in j0[2:4]]
    made: list[str] = []
    load = TenantRuns.load

    def counted_load(runs: TenantRuns, ctx: Any, tenant: str, now_ms: int) -> Any:
        made.append(tenant)
        return load(runs, ctx, tenant, now_ms)

    monkeypatch.setattr(TenantRuns, "load", counted_load)
    side.batch(batch, T0 + 1_050, together=True)
    assert side.proc.metrics.deferred._value.get() == 4  # the four successes wait (later.py)
    # the first success makes acme's facts, the second uses them; the failure (applied at
    # once, as `process` applies it) makes its own; the third success makes them again and
    # the fourth uses those
    assert made == ["acme"] * 3
