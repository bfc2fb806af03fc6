"""The execution path on the driver: the real scheduler, reaper and workers (wired as
apps/*.py wire them) on the in-memory cluster, an in-process target, and a clock that moves only
when the test says. Mirrors tests/integration/test_execution_live.py, minus what only a real
process proves (kill -9, SIGSTOP, a real HTTP target and its signature)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.fired_series import runs_of
from kadence.models import (
    CancelRun,
    Decision,
    LeaseEventKind,
    OutcomeStatus,
    ReplayDeadLetter,
)
from kadence.targets import Result
from streams.runtime.loop import Runner
from streams.scheduler.processor import SchedulerProcessor
from streams.worker.loop import Worker
from testkit.driver import START_MS, Driver
from testkit.driver.history import checked
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import (
    TTL_MS,
    applied,
    applied_successes,
    once,
    per_second,
    settings_for,
)


@pytest.fixture
def stack(driver: Driver, tmp_path: Path) -> Iterator[DriverStack]:
    s = DriverStack(driver, settings_for(tmp_path / "state"))
    yield s
    s.close()


def started(stack: DriverStack) -> DriverStack:
    stack.scheduler()
    stack.reaper()
    stack.worker()
    stack.settle()
    return stack


def holder(stack: DriverStack, execution_id: str) -> Worker:
    [worker] = [w for w in stack.driver.loops if isinstance(w, Worker) and execution_id in w.runs]
    return worker


def dead_letter_depth(stack: DriverStack) -> int:
    [scheduler] = [
        r
        for r in stack.driver.loops
        if isinstance(r, Runner) and isinstance(r.processor, SchedulerProcessor)
    ]
    processor = scheduler.processor
    assert isinstance(processor, SchedulerProcessor)
    return sum(processor.dead_letter_depth(t) for t in scheduler.tasks.values())


def issued() -> datetime:
    return ms_to_datetime(START_MS)


def test_a_cron_job_fires_at_its_due_times_never_early_runs_once_and_is_recorded(
    stack: DriverStack,
) -> None:
    started(stack)
    job = per_second("every-second", start_s=40, seconds=3)  # dispatched 30 s ahead
    stack.put(job)
    stack.run_for(39_000)
    assert len(stack.executions()) == 3  # out ahead of time ...
    assert stack.target.hits == []  # ... but held by the worker until due
    stack.run_for(5_000, step_ms=100)
    hits = stack.target.calls("every-second")
    assert [h.at_ms - h.due_ms for h in hits] == [0, 0, 0]  # at its due time, never early
    assert [(h.attempt, h.delivery) for h in hits] == [(1, 1)] * 3
    assert len({h.execution_id for h in hits}) == 3
    assert [o.status for o in stack.outcomes()] == [OutcomeStatus.succeeded] * 3
    records = [run for h in stack.history() for run in runs_of(h)]  # a series: one per run
    fired = sorted(str(h.execution_id) for h in records if h.decision is Decision.fired)
    assert fired == sorted(h.execution_id for h in hits)
    assert len(applied_successes(stack, "every-second")) == 3
    assert [kind for kind, _, _ in stack.leases()].count(LeaseEventKind.released) == 3
    report = checked(stack, start_ms=START_MS, end_ms=stack.driver.now_ms())
    assert report.ok, report.render()
    assert (report.expected, report.succeeded) == (3, 3)


def test_a_failing_target_is_retried_with_backoff_then_dead_lettered_and_replayed(
    stack: DriverStack,
) -> None:
    started(stack)
    stack.target.failing("flaky")
    retry = {"max_attempts": 3, "initial_backoff_ms": 1_000, "multiplier": 2, "jitter": "none"}
    stack.put(once("flaky", in_s=2, handler="flaky", retry=retry))
    stack.run_for(10_000, step_ms=100)
    attempts = stack.target.calls("flaky")
    assert [h.attempt for h in attempts] == [1, 2, 3]  # never above max_attempts
    assert len({h.execution_id for h in attempts}) == 1  # a retry keeps the id
    gaps = [b.at_ms - a.at_ms for a, b in itertools.pairwise(attempts)]
    assert gaps[0] >= 1_000 and gaps[1] >= 2_000, gaps  # spaced at least by the backoff
    [dead] = stack.dead_letters()
    assert dead.reason == "retries_exhausted"
    assert dead.last_error is not None
    assert (dead.last_error.code, dead.last_error.message) == ("503", "target is down")
    assert dead.execution.execution_id == attempts[0].execution_id
    assert dead_letter_depth(stack) == 1
    assert len(applied(stack, "flaky", Decision.dead_lettered)) == 1
    report = checked(stack, start_ms=START_MS, end_ms=stack.driver.now_ms())
    assert report.ok and report.dead_lettered == 1, report.render()

    stack.target.on("flaky", lambda _ex, _stop: None)  # the target is back
    stack.send(
        ReplayDeadLetter(tenant="acme", job_id="flaky", request_id="replay-1", issued_at=issued())
    )
    stack.run_for(1_000, step_ms=100)
    replayed = stack.target.calls("flaky")[3]
    assert replayed.execution_id == dead.execution.execution_id
    assert dead_letter_depth(stack) == 0
    assert [o.status for o in stack.outcomes("flaky")][-1] is OutcomeStatus.succeeded


def test_a_worker_that_dies_mid_run_is_redelivered_with_the_same_id_and_runs_once_more(
    stack: DriverStack,
) -> None:
    started(stack)
    gate = stack.target.gate("slow")
    stack.put(once("slow", in_s=2, handler="slow"))
    stack.run_for(2_500)
    [first] = stack.target.calls("slow")
    stack.driver.crash(holder(stack, first.execution_id))
    stack.worker("w-next")
    stack.settle()
    stack.run_for(TTL_MS + 2_500)  # the lease, then the reaper's grace
    second = stack.target.calls("slow")[1]
    gate.open()
    stack.run_for(500)
    assert second.execution_id == first.execution_id
    assert (first.delivery, second.delivery) == (1, 2)
    assert len(stack.target.calls("slow")) == 2
    assert len(applied_successes(stack, "slow")) == 1
    [redelivered] = [h for h in stack.history() if h.decision is Decision.redelivered]
    assert redelivered.delivery == 2
    assert [(o.status, o.delivery) for o in stack.outcomes()] == [(OutcomeStatus.succeeded, 2)]


def test_a_job_that_kills_every_worker_is_dead_lettered_at_the_redelivery_cap(
    driver: Driver, tmp_path: Path
) -> None:
    stack = DriverStack(driver, settings_for(tmp_path / "state", redelivery_cap=2))
    try:
        started(stack)
        stack.target.gate("poison")
        stack.put(once("poison", in_s=2, handler="poison"))
        deaths = 0
        for _ in range(20):
            stack.run_for(1_000)
            if stack.dead_letters():
                break
            running = [w for w in driver.loops if isinstance(w, Worker) and w.runs]
            for worker in running:  # it dies running the poison job: a new one takes its place
                driver.crash(worker)
                deaths += 1
                stack.worker(f"w{deaths}")
        [dead] = stack.dead_letters()
    finally:
        stack.close()
    assert deaths == 2  # deliveries 1 and 2 each killed a worker; then the reaper gave up
    assert [h.delivery for h in stack.target.calls("poison")] == [1, 2]
    assert dead.reason == "redelivery_cap"
    assert dead.last_error is not None
    assert dead.last_error.type == "RedeliveryCap"


def test_a_run_longer_than_several_leases_renews_and_is_not_redelivered(
    stack: DriverStack,
) -> None:
    started(stack)
    gate = stack.target.gate("long")
    stack.put(once("long", in_s=2, handler="long", timeout_ms=60_000))
    stack.run_for(12_000)  # four leases long
    gate.open()
    stack.run_for(500)
    assert len(stack.target.calls("long")) == 1
    assert not [h for h in stack.history() if h.decision is Decision.redelivered]
    renewed = [f for f in stack.leases() if f[0] is LeaseEventKind.renewed]
    assert len(renewed) >= 9  # ten seconds at one renewal per second (ttl 3 s / 3)
    assert len(applied_successes(stack, "long")) == 1


def test_cancel_stops_a_run_in_flight(stack: DriverStack) -> None:
    started(stack)
    stack.target.gate("cancel-me")
    stack.put(once("cancel-me", in_s=2, handler="cancel-me", timeout_ms=120_000))
    stack.run_for(2_500)
    [hit] = stack.target.calls("cancel-me")
    stack.send(
        CancelRun(
            tenant="acme",
            job_id="cancel-me",
            request_id="stop-it",
            issued_at=issued(),
            execution_id=hit.execution_id,
        )
    )
    stack.settle()  # no time passes: the cancel reaches the run at once
    [revoked] = stack.revocations()
    assert revoked.execution_id == hit.execution_id
    [outcome] = stack.outcomes("cancel-me")
    assert outcome.status is OutcomeStatus.cancelled
    assert len(applied(stack, "cancel-me", Decision.cancelled)) == 1
    stack.run_for(10_000)
    assert len(stack.target.calls("cancel-me")) == 1  # not retried, not redelivered


def test_a_run_past_its_timeout_ends_timed_out_and_is_dead_lettered(stack: DriverStack) -> None:
    started(stack)
    stack.target.gate("hangs")
    stack.put(once("hangs", in_s=2, handler="hangs", timeout_ms=3_000, retry={"max_attempts": 1}))
    stack.run_for(4_000, step_ms=250)
    assert stack.outcomes("hangs") == []  # renewed, still running at 2 s + 2 s
    stack.run_for(1_500, step_ms=250)
    [timed_out] = stack.outcomes("hangs")
    assert timed_out.status is OutcomeStatus.timed_out
    duration = datetime_to_ms(timed_out.finished_at) - datetime_to_ms(timed_out.started_at)
    assert 3_000 <= duration < 3_500
    assert [d.reason for d in stack.dead_letters()] == ["retries_exhausted"]


def test_a_stopped_worker_finishes_its_run_first(stack: DriverStack) -> None:
    started(stack)
    gate = stack.target.gate("graceful")
    stack.put(once("graceful", in_s=2, handler="graceful", timeout_ms=60_000))
    stack.run_for(2_500)
    [hit] = stack.target.calls("graceful")
    worker = holder(stack, hit.execution_id)
    threading.Timer(0.05, gate.open).start()  # the run ends while the worker is stopping
    stack.driver.stop(worker)
    [done] = stack.outcomes("graceful")
    assert (done.status, done.delivery) == (OutcomeStatus.succeeded, 1)
    stack.run_for(TTL_MS + 3_000)
    assert not [h for h in stack.history() if h.decision is Decision.redelivered]
    assert len(applied_successes(stack, "graceful")) == 1


def test_a_worker_paused_past_its_lease_cannot_overwrite_the_newer_delivery(
    stack: DriverStack,
) -> None:
    """The pause: the worker stops turning (its target goes on) and its session runs out, so
    the group hands its partitions to the other worker. The reaper redelivers; the other worker
    runs delivery 2. The paused one wakes, finds its lease gone, and reports lease_lost, which
    the scheduler records but does not apply."""
    started(stack)
    stack.worker("w1")
    stack.settle()
    gate = stack.target.gate("paused-worker", stubborn=True)
    stack.put(once("paused-worker", in_s=2, handler="paused-worker", timeout_ms=60_000))
    stack.run_for(2_500)
    [first] = stack.target.calls("paused-worker")
    paused = holder(stack, first.execution_id)
    stack.driver.loops.remove(paused)  # SIGSTOP
    stack.driver.cluster.kick(f"{stack.settings.namespace}.workers", paused.worker_id)
    stack.run_for(TTL_MS + 2_500)
    second = stack.target.calls("paused-worker")[1]
    assert (second.execution_id, second.delivery) == (first.execution_id, 2)
    gate.open()  # both runs end; the other worker reports delivery 2
    stack.run_for(500)
    stack.driver.loops.append(paused)  # SIGCONT
    stack.run_for(2_000)
    assert len(stack.target.calls("paused-worker")) == 2  # the woken worker invoked nothing more
    by_delivery = {o.delivery: o.status for o in stack.outcomes("paused-worker")}
    assert by_delivery == {1: OutcomeStatus.lease_lost, 2: OutcomeStatus.succeeded}
    assert len(applied_successes(stack, "paused-worker")) == 1


def test_a_redelivery_to_the_worker_whose_lease_ran_out_is_run_not_dropped(
    stack: DriverStack,
) -> None:
    """The pause is shorter than the session: the worker keeps its partition, so the reaper's
    delivery 2 comes back to it while its own delivery 1 (lease lost) still runs."""
    started(stack)
    gate = stack.target.gate("lost-lease", stubborn=True)
    stack.put(once("lost-lease", in_s=2, handler="lost-lease", timeout_ms=60_000))
    stack.run_for(2_500)
    [worker] = [w for w in stack.driver.loops if isinstance(w, Worker)]
    stack.driver.loops.remove(worker)  # paused, partitions kept
    stack.run_for(TTL_MS + 2_500)
    assert [e.delivery for e in stack.executions()] == [1, 2]
    stack.driver.loops.append(worker)
    stack.run_for(500)
    assert len(stack.target.calls("lost-lease")) == 1  # delivery 2 waits for delivery 1
    gate.open(Result.ok())
    stack.run_for(1_000)
    assert [h.delivery for h in stack.target.calls("lost-lease")] == [1, 2]
    by_delivery = {o.delivery: o.status for o in stack.outcomes("lost-lease")}
    assert by_delivery == {1: OutcomeStatus.lease_lost, 2: OutcomeStatus.succeeded}
