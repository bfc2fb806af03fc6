"""The scheduler on the driver through crashes, takeovers and downtime: every occurrence
dispatched once, none early, none lost. Mirrors tests/integration/test_scheduler_live.py and
the downtime case of test_scheduler_control.py; what only a real broker and real processes
prove (kill -9 and SIGSTOP of a process, session timeouts measured in seconds, p99 lateness on
a wall clock) stays there."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from kadence.clock import datetime_to_ms
from kadence.models import Decision, HandlerTarget, ScheduleDefinition
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id
from testkit.driver import START_MS, Driver
from testkit.driver.history import checked
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import T0, dispatched_once, per_second, settings_for


class Died(BaseException):
    """The process dies here (not an Exception: nothing in the loop may catch it)."""


def die() -> None:
    raise Died


def expected_ids(*jobs: ScheduleDefinition) -> set[str]:
    out: set[str] = set()
    for d in jobs:
        compiled = compile_schedule(d.schedule, d.key)
        out |= {execution_id(d.key, o.nominal_ms) for o in compiled.upcoming(0, 10_000)}
    return out


@pytest.mark.parametrize("store", ["rocksdb", "memory"])
@pytest.mark.parametrize("when", ["between-turns", "transaction-open"])
def test_a_second_scheduler_takes_over_and_nothing_is_lost_or_doubled(
    driver: Driver, tmp_path: Path, store: str, when: str
) -> None:
    stack = DriverStack(driver, settings_for(tmp_path / "state", partitions=4))
    memory = store == "memory"
    a = stack.scheduler("a", in_memory=memory)
    b = stack.scheduler("b", in_memory=memory)
    stack.reaper()
    stack.worker()
    stack.settle()
    owned_by_a = sorted(a.tasks)
    assert len(owned_by_a) == len(b.tasks) == 2
    jobs = [per_second(f"job-{i}", start_s=40, seconds=20, tenant=f"t{i}") for i in range(8)]
    stack.put(*jobs)
    stack.run_for(48_000)  # eight seconds in
    if when == "transaction-open":
        client = a.session.transactional_id
        driver.cluster.faults.on("commit_transaction", die, client=client)
        with pytest.raises(Died):
            stack.run_for(1_000)  # a dies with outcomes and fires not committed
    driver.crash(a)
    stack.run_for(20_000)
    stack.close()
    assert sorted(b.tasks) == [0, 1, 2, 3]
    taken = [r for r in b.stats.restores if r.partition in owned_by_a]
    if memory:  # a's jobs, from the changelog's start
        assert [(r.records > 0, r.from_scratch) for r in taken] == [(True, True)] * 2
    else:  # from b's standby copies of them (issue 30), not from the start
        assert [r.from_scratch for r in taken] == [False, False]
    assert set(dispatched_once(stack)) == expected_ids(*jobs)  # none lost
    assert max(dispatched_once(stack).values()) == 1  # none doubled
    assert all(e.dispatched_at >= e.due_at - timedelta(seconds=30) for e in stack.executions())
    report = checked(stack, start_ms=START_MS, end_ms=driver.now_ms())
    assert report.ok, report.render()
    assert (report.expected, report.succeeded) == (8 * 20, 8 * 20)


@pytest.mark.parametrize("store", ["intact", "wiped"])
def test_a_scheduler_killed_during_a_burst_restarts_and_loses_and_doubles_nothing(
    driver: Driver, tmp_path: Path, store: str
) -> None:
    settings = settings_for(
        tmp_path / "state", partitions=1, fires_per_transaction=50, dispatch_ahead_ms=0
    )
    stack = DriverStack(driver, settings)
    a = stack.scheduler("a")
    jobs = [
        ScheduleDefinition(
            tenant=f"t{i % 20}",
            job_id=f"burst-{i}",
            version=1,
            schedule={"kind": "once", "run_at": T0 + timedelta(seconds=15)},
            target=HandlerTarget(name="ok"),
        )
        for i in range(400)
    ]
    stack.put(*jobs)
    stack.settle()
    driver.advance(15_000)
    driver.turn(a, times=2)  # two transactions of 50 fires committed
    driver.cluster.faults.on("commit_transaction", die, client=a.session.transactional_id)
    with pytest.raises(Died):
        driver.turn(a)  # the third dies open
    driver.crash(a)
    committed_at_kill = len(stack.executions())
    if store == "wiped":
        shutil.rmtree(settings.state_dir / settings.namespace)
    stack.scheduler("a")
    stack.run_for(1_000)
    assert committed_at_kill == 100
    by_id = dispatched_once(stack)
    assert set(by_id) == {execution_id(j.key, datetime_to_ms(j.schedule.run_at)) for j in jobs}  # type: ignore[union-attr]
    assert max(by_id.values()) == 1
    assert all(e.dispatched_at >= e.due_at for e in stack.executions())  # none early


def test_five_minutes_down_under_each_missed_run_policy(driver: Driver, tmp_path: Path) -> None:
    """The scheduler stops; the clock moves five minutes on; a new one (same instance, same
    RocksDB) finds five occurrences due, the newest 40 s late (the grace is 30 s)."""
    stack = DriverStack(driver, settings_for(tmp_path / "state", partitions=1))
    first = T0 + timedelta(minutes=2)
    modes = ["latest_once", "all", "none"]
    jobs = {
        m: ScheduleDefinition.model_validate(
            {
                "tenant": "acme",
                "job_id": f"per-minute-{m}",
                "version": 1,
                "schedule": {
                    "kind": "cron",
                    "expression": "* * * * *",
                    "spread_s": 0,
                    "start_at": first,
                },
                "target": HandlerTarget(name="ok"),
                "overlap": "allow",
                "missed": {"mode": m},
            }
        )
        for m in modes
    }
    a = stack.scheduler("a")
    stack.put(*jobs.values())
    stack.settle()
    driver.stop(a)
    driver.advance(datetime_to_ms(first + timedelta(minutes=4, seconds=40)) - driver.now_ms())
    stack.scheduler("a")
    stack.settle()
    minutes = [datetime_to_ms(first) + i * 60_000 for i in range(5)]
    by_job: dict[str, list[int]] = {m: [] for m in modes}
    for ex in stack.executions():
        if datetime_to_ms(ex.nominal_at) in minutes:
            by_job[ex.job_id.removeprefix("per-minute-")].append(datetime_to_ms(ex.nominal_at))
    assert by_job["latest_once"] == [minutes[-1]]
    assert sorted(by_job["all"]) == minutes
    assert by_job["none"] == []
    assert all(
        e.trigger == "catch_up"
        for e in stack.executions()
        if datetime_to_ms(e.nominal_at) in minutes
    )
    decisions = [(h.job_id, h.decision) for h in stack.history()]
    assert decisions.count(("per-minute-latest_once", Decision.coalesced)) == 4
    assert decisions.count(("per-minute-none", Decision.missed)) == 5
