"""A tenant's runs in progress are judged per scheduler process (streams/scheduler/
tenant_limits.py): each process's count follows the partitions it owns through the real loop's
assignments, revocations and restarts (streams/runtime/loop.py tells it, `Owning`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from streams.runtime.context import ProcessorContext
from streams.runtime.loop import Runner
from streams.scheduler.processor import SchedulerProcessor
from testkit.driver import Driver
from testkit.driver.faults import abort_error
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import once, settings_for

JOBS = 40


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
