"""A tenant's runs in progress are judged per scheduler process (streams/scheduler/
tenant_limits.py): each process's count follows the partitions it owns through the real loop's
assignments, revocations and restarts (streams/runtime/loop.py tells it, `Owning`); a run
dispatched ahead counts from its due second."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from bench.misfire_skips import occurrences
from kadence.models import Decision, HandlerTarget, ScheduleDefinition
from streams.runtime.context import ProcessorContext
from streams.runtime.loop import Runner
from streams.scheduler.processor import SchedulerProcessor
from streams.scheduler.tenant_limits import TenantLoad
from testkit.driver import Driver
from testkit.driver.faults import abort_error
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import TTL_MS, once, per_second, settings_for

JOBS = 40
SECONDS = 60


def _counted(runner: Runner) -> tuple[int, int]:
    """(what the process counts of acme's runs in progress, what its partitions' stores
    hold)."""
    proc = runner.processor
    assert isinstance(proc, SchedulerProcessor)
    stored = sum(int(t.get(b"~inflight/acme") or b"0") for t in runner.tasks.values())
    return proc.tenants.use.running("acme"), stored


def test_each_scheduler_counts_what_the_partitions_it_owns_hold(
    driver: Driver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = DriverStack(
        driver, settings_for(tmp_path / "state", partitions=4, tenant_max_in_flight=1_000)
    )
    s0 = stack.scheduler("s0")
    stack.settle()
    stack.put(*(once(f"j{i}", in_s=2, timeout_ms=3_600_000) for i in range(JOBS)))
    stack.run_for(4_000)  # no worker: every run stays in progress
    assert len({e.execution_id for e in stack.executions()}) == JOBS
    assert _counted(s0) == (JOBS, JOBS)

    s1 = stack.scheduler("s1")  # the group rebalances: each takes some partitions
    stack.run_for(2_000)
    assert s0.tasks and s1.tasks and set(s0.tasks).isdisjoint(s1.tasks)
    mine, theirs = _counted(s0), _counted(s1)
    assert mine[0] == mine[1] and theirs[0] == theirs[1]  # each its own partitions' runs
    assert mine[1] + theirs[1] == JOBS and 0 < mine[1] < JOBS

    driver.crash(s1)  # s0 takes every partition back, restored from the changelog
    stack.run_for(2_000)
    assert len(s0.tasks) == 4
    assert _counted(s0) == (JOBS, JOBS)

    told: list[list[int]] = []
    proc = s0.processor
    assert isinstance(proc, SchedulerProcessor)
    recount = proc.owned

    def owned(tasks: Mapping[int, ProcessorContext]) -> None:
        told.append(sorted(tasks))
        recount(tasks)

    monkeypatch.setattr(proc, "owned", owned)
    driver.cluster.faults.fail("commit_transaction", abort_error())  # the next commit aborts
    stack.put(*(once(f"k{i}", in_s=10, timeout_ms=3_600_000) for i in range(5)))
    stack.run_for(10_000)
    assert s0.stats.aborts >= 1 and told and told[0] == [0, 1, 2, 3]  # counted again
    assert _counted(s0) == (JOBS + 5, JOBS + 5)


def _every_second(job_id: str) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "cron", "spread_s": 0, "expression": "* * * * * *"},
            "target": HandlerTarget(name="ok"),
            "lease_ttl_ms": TTL_MS,
            "overlap": "allow",
        }
    )


def _four_per_second_jobs(driver: Driver, tmp_path: Path) -> DriverStack:
    """Four per-second jobs for a minute through the runtime's loop, a worker and the reaper,
    with 30 s of look-ahead (about 120 runs out ahead) and a cap of 60 runs in progress."""
    stack = DriverStack(
        driver,
        settings_for(tmp_path / "state", tenant_max_in_flight=60, dispatch_ahead_ms=30_000),
    )
    stack.scheduler("s0")
    stack.reaper("r0")
    stack.worker("w0")
    stack.settle()
    stack.put(*(_every_second(f"j{i}") for i in range(4)))
    stack.run_for(60_000)
    return stack


def test_runs_out_ahead_do_not_take_the_cap_through_the_real_loop(
    driver: Driver, tmp_path: Path
) -> None:
    """What is in progress is what is due and not ended (a few runs here): the look-ahead, past
    the cap, holds no job back, and every second's run of each job goes out."""
    stack = _four_per_second_jobs(driver, tmp_path)
    assert [h for h in stack.history() if h.decision is Decision.throttled] == []
    assert len({e.execution_id for e in stack.executions()}) >= 4 * 60


def test_counted_from_when_they_went_out_the_look_ahead_alone_held_the_tenant(
    driver: Driver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same minute with runs counted in progress from when they went out (no run counted
    as not due yet, as until 0.21.0): the look-ahead alone takes the tenant to the cap."""
    monkeypatch.setattr(TenantLoad, "not_due", lambda _self, _fired: 0)
    stack = _four_per_second_jobs(driver, tmp_path)
    assert [h for h in stack.history() if h.decision is Decision.throttled]


@pytest.mark.parametrize("ahead_ms", [0, 30_000])
def test_jobs_held_past_their_end_ran_or_were_told_skipped_each_occurrence(
    driver: Driver, tmp_path: Path, ahead_ms: int
) -> None:
    """Four per-second jobs of a minute whose tenant is at its cap on runs in progress from
    their third second due (no worker yet: nothing ends) and stays there past their end: once
    a worker reads the runs, each occurrence either succeeded or is counted skipped in
    history, none both and none neither (what B2 counts `lost`: bench/lost_runs.py)."""
    settings = settings_for(tmp_path / "state", tenant_max_in_flight=6, dispatch_ahead_ms=ahead_ms)
    stack = DriverStack(driver, settings)
    stack.scheduler("s0")
    stack.reaper("r0")
    stack.settle()
    jobs = [per_second(f"j{i}", start_s=5, seconds=SECONDS) for i in range(4)]
    stack.put(*jobs)
    stack.run_for(SECONDS * 1_000 + 40_000)  # past the jobs' end, held at the cap
    assert [h for h in stack.history() if h.decision is Decision.throttled]
    stack.worker("w0")
    stack.run_for(120_000)
    for d in jobs:
        ok = {o.execution_id for o in stack.outcomes(d.job_id) if o.status == "succeeded"}
        skipped = sum(occurrences(h, 1_000) for h in stack.history(d.job_id))
        assert len(ok) + skipped == SECONDS, (d.job_id, len(ok), skipped)
