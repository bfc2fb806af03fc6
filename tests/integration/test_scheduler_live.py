"""The scheduler against the real broker: on time, exactly once through crashes and failover."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kadence.client import KadenceClient
from kadence.clock import datetime_to_ms
from kadence.models import (
    CronSchedule,
    ExecutionRequested,
    KafkaTarget,
    OnceSchedule,
    ScheduleDefinition,
)
from kadence.settings import KadenceSettings
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.identity import execution_id
from kadence.topics import Topics
from testkit.scheduler_process import SchedulerProcess, counts, executions, not_too_early
from testkit.topic_reader import read_topic
from tests.conftest import provisioned


def per_second(job: str, start: datetime, seconds: int, tenant: str = "acme") -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant=tenant,
        job_id=job,
        version=1,
        schedule=CronSchedule(
            expression="* * * * * *", start_at=start, end_at=start + timedelta(seconds=seconds - 1)
        ),
        target=KafkaTarget(topic="out"),
        overlap="allow",
    )


def expected_ids(d: ScheduleDefinition) -> set[str]:
    compiled = compile_schedule(d.schedule, d.key)
    return {execution_id(d.key, o.nominal_ms) for o in compiled.upcoming(0, 10_000)}


@pytest.mark.slow
@pytest.mark.parametrize("ahead_ms", [0, 30_000], ids=["at-due", "look-ahead"])
def test_a_job_every_second_for_a_minute(
    settings: KadenceSettings, tmp_path: Path, ahead_ms: int
) -> None:
    settings = settings.model_copy(update={"dispatch_ahead_ms": ahead_ms})
    sched = SchedulerProcess(settings, "a", tmp_path / "state", dispatch_ahead_ms=ahead_ms).start()
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=4)
        job = per_second("every-second", start, 60)
        with KadenceClient(settings) as client:
            client.put(job)
        got = executions(settings, expect=60, timeout_s=90)
    finally:
        sched.stop()
    assert len(got) == 60
    assert set(counts(got)) == expected_ids(job)  # unique, deterministic ids
    assert all(n == 1 for n in counts(got).values())
    assert not_too_early(settings, got)
    if ahead_ms == 0:
        assert all(e.dispatched_at >= e.due_at for e in got)  # none early
    else:  # each went out the look-ahead before it was due (the first ones: when created)
        assert [e for e in got if e.dispatched_at < e.due_at]
    # every run within a second, the first ones too: the job is put 4 s before it starts on a
    # scheduler just started, whose first search in a zone once took seconds on a loaded machine
    lateness = [max(0.0, (e.dispatched_at - e.due_at).total_seconds()) for e in got]
    assert max(lateness) < 1.0, sorted(lateness)[-5:]


def _load_burst(settings: KadenceSettings, n: int, due: datetime) -> list[ScheduleDefinition]:
    jobs = [
        ScheduleDefinition(
            tenant=f"t{i % 20}",
            job_id=f"burst-{i}",
            version=1,
            schedule=OnceSchedule(run_at=due),
            target=KafkaTarget(topic="out"),
        )
        for i in range(n)
    ]
    with KadenceClient(settings) as client:
        client.put_many(jobs)
    return jobs


def _first_uncommitted_execution(settings: KadenceSettings, timeout_s: float) -> None:
    """Wait until the burst is under way: the first (possibly uncommitted) execution record."""
    msgs = read_topic(
        settings.bootstrap_servers, Topics(settings).executions, 1, timeout_s, "read_uncommitted"
    )
    assert msgs, "the burst never started"


@pytest.mark.slow
@pytest.mark.parametrize("store", ["intact", "wiped"])
def test_kill_9_during_a_burst_loses_and_doubles_nothing(
    settings: KadenceSettings, tmp_path: Path, store: str
) -> None:
    n = 3000
    state = tmp_path / "state"
    sched = SchedulerProcess(settings, "a", state, fires_per_transaction=100).start()
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=15)
    jobs = _load_burst(settings, n, due)
    try:
        _first_uncommitted_execution(settings, timeout_s=60)
        sched.kill(signal.SIGKILL)
        committed_at_kill = len(executions(settings, expect=n, timeout_s=3))
        if store == "wiped":
            import shutil  # noqa: PLC0415

            shutil.rmtree(state / settings.namespace)
        sched = SchedulerProcess(settings, "a", state, fires_per_transaction=100).start()
        got = executions(settings, expect=n, timeout_s=90)
        time.sleep(3)  # anything doubled would arrive now
        got = executions(settings, expect=n + 1, timeout_s=5)
    finally:
        sched.stop()
    assert committed_at_kill < n, "the kill landed after the burst; nothing was tested"
    by_id = counts(got)
    assert set(by_id) == {execution_id(j.key, datetime_to_ms(due)) for j in jobs}  # none lost
    assert max(by_id.values()) == 1  # none doubled
    assert not_too_early(settings, got)


def _two_schedulers_and_a_fault(
    kafka_bootstrap: str, tmp_path: Path, seconds: int, fault: Callable[[SchedulerProcess], None]
) -> tuple[list[ScheduleDefinition], list[ExecutionRequested]]:
    """Two schedulers share 12 per-second jobs; `fault` hits the first one 6 s in."""
    from kadence.provisioning import delete_namespace  # noqa: PLC0415

    settings = provisioned(kafka_bootstrap, partitions=6)
    a = SchedulerProcess(settings, "a", tmp_path / "a").start()
    b = SchedulerProcess(settings, "b", tmp_path / "b").start()
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=6)
        jobs = [per_second(f"job-{i}", start, seconds, tenant=f"t{i}") for i in range(12)]
        with KadenceClient(settings) as client:
            client.put_many(jobs)
        time.sleep((start - datetime.now(UTC)).total_seconds() + 6)
        fault(a)
        executions(settings, expect=12 * seconds, timeout_s=90)
        time.sleep(3)  # anything doubled would arrive now
        return jobs, executions(settings, expect=12 * seconds + 1, timeout_s=4)
    finally:
        a.stop()
        b.stop()
        delete_namespace(settings)


def _exactly_once(jobs: list[ScheduleDefinition], got: list[ExecutionRequested]) -> None:
    by_id = counts(got)
    want: set[str] = set().union(*(expected_ids(j) for j in jobs))
    doubled = sorted(k for k, n in by_id.items() if n > 1)
    missing = sorted(want - set(by_id))
    assert not doubled, f"{len(doubled)} occurrences doubled, e.g. {doubled[:3]}"
    assert not missing, f"{len(missing)} occurrences missing, e.g. {missing[:3]}"
    assert all(e.dispatched_at >= e.due_at - timedelta(seconds=30) for e in got)


@pytest.mark.slow
def test_a_second_scheduler_takes_over_and_nothing_is_lost_or_doubled(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # b takes over after the session timeout (6 s) plus restore
    jobs, got = _two_schedulers_and_a_fault(
        kafka_bootstrap, tmp_path, 30, lambda a: a.kill(signal.SIGKILL)
    )
    _exactly_once(jobs, got)
    worst = max((e.dispatched_at - e.due_at).total_seconds() for e in got)
    assert worst < 6 + 15, "takeover should take about the session timeout plus restore"


@pytest.mark.slow
def test_a_paused_zombie_is_fenced_and_nothing_is_doubled(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """SIGSTOP one scheduler past its session timeout, let the other take over, SIGCONT it."""

    def zombie(a: SchedulerProcess) -> None:
        a.kill(signal.SIGSTOP)
        time.sleep(15)  # the session timeout (6 s) passes: b owns everything
        a.kill(signal.SIGCONT)  # a wakes believing it still owns its partitions

    _exactly_once(*_two_schedulers_and_a_fault(kafka_bootstrap, tmp_path, 40, zombie))
