"""Issue 42, item 9, on the driver (the real scheduler, reaper and workers, a clock that moves
only when the test says): a run not started within its job's max_event_age_ms of its scheduled
time is not started; it is dead-lettered with error `MaxEventAge`, its target never called, and
retries stop once the age has passed (they count from the occurrence's scheduled time)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import MAX_EVENT_AGE_ERROR, DeadLetterReason, Decision, TriggerNow
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import T0, applied, applied_successes, once, settings_for


@pytest.fixture
def stack(driver: Driver, tmp_path: Path) -> Iterator[DriverStack]:
    s = DriverStack(driver, settings_for(tmp_path / "state"))
    yield s
    s.close()


def without_workers(stack: DriverStack) -> DriverStack:
    stack.scheduler()
    stack.reaper()
    stack.settle()
    return stack


def test_a_run_reached_after_its_max_event_age_is_dead_lettered_not_started(
    stack: DriverStack,
) -> None:
    without_workers(stack)
    stack.put(once("late", in_s=5, max_event_age_ms=10_000), once("on-time", in_s=5))
    stack.run_for(20_000)  # due at 5 s; no worker until 20 s: 15 s late, over the 10 s age
    [ex] = [e for e in stack.executions() if e.job_id == "late"]
    assert ex.start_by is not None
    assert datetime_to_ms(ex.start_by) == datetime_to_ms(T0 + timedelta(seconds=15))
    stack.worker()
    stack.run_for(2_000)
    assert stack.target.calls("late") == []  # never started
    assert len(stack.target.calls("on-time")) == 1  # the same lateness, no limit: it runs
    [dead] = applied(stack, "late", Decision.dead_lettered)
    assert dead.error is not None
    assert dead.error.type == MAX_EVENT_AGE_ERROR
    assert "not started: 5.000 s past its start_by 2026-" in dead.error.message
    assert "max_event_age_ms" in dead.reason
    [letter] = [d for d in stack.dead_letters() if d.execution.job_id == "late"]
    assert letter.reason is DeadLetterReason.not_retryable


def test_a_run_started_within_its_max_event_age_runs(stack: DriverStack) -> None:
    without_workers(stack)
    stack.put(once("in-time", in_s=5, max_event_age_ms=10_000))
    stack.run_for(14_000)  # 9 s late: within the age
    stack.worker()
    stack.run_for(2_000)
    assert len(stack.target.calls("in-time")) == 1
    assert len(applied_successes(stack, "in-time")) == 1


def test_retries_stop_once_the_age_has_passed_counted_from_the_scheduled_time(
    stack: DriverStack,
) -> None:
    stack.target.failing("flaky")
    without_workers(stack)
    stack.worker()
    retry = {"max_attempts": 10, "initial_backoff_ms": 4_000, "max_backoff_ms": 4_000,
             "jitter": "none"}  # fmt: skip
    stack.put(once("flaky-job", in_s=5, handler="flaky", retry=retry, max_event_age_ms=10_000))
    stack.run_for(30_000, step_ms=250)
    # attempts at 5, 9 and 13 s start by 15 s; the fourth, due at 17 s, is past it
    assert [h.attempt for h in stack.target.calls("flaky-job")] == [1, 2, 3]
    [dead] = applied(stack, "flaky-job", Decision.dead_lettered)
    assert (dead.attempt, dead.error and dead.error.type) == (4, MAX_EVENT_AGE_ERROR)


def test_a_manual_trigger_counts_from_the_trigger(stack: DriverStack) -> None:
    without_workers(stack)
    stack.put(once("manual", in_s=3_600, max_event_age_ms=5_000))
    stack.run_for(60_000)  # a minute after the job was defined: past any age counted from then
    for request_id in ("soon", "late"):
        issued = ms_to_datetime(stack.driver.now_ms())
        trigger = TriggerNow(tenant="acme", job_id="manual", request_id=request_id,
                             issued_at=issued)  # fmt: skip
        stack.send(trigger)
    stack.run_for(3_000)  # no worker for 3 s: within the age of both
    worker = stack.worker()
    stack.run_for(1_000)
    assert len(stack.target.calls("manual")) == 2
    stack.driver.stop(worker)
    stack.send(TriggerNow(tenant="acme", job_id="manual", request_id="later",
                          issued_at=ms_to_datetime(stack.driver.now_ms())))  # fmt: skip
    stack.run_for(6_000)  # no worker for 6 s: past its age
    stack.worker("w1")
    stack.run_for(1_000)
    assert len(stack.target.calls("manual")) == 2
    [dead] = applied(stack, "manual", Decision.dead_lettered)
    assert dead.execution_id is not None and dead.execution_id.endswith("@manual:later")
