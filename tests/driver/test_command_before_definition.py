"""A command read before its job's definition (issue 44; the live connections test once
timed out so): POST /v1/jobs answers 201 once the query view has read the definition from
`schedules`, not the scheduler; the trigger sent next goes to `commands`, and the scheduler
reads the two topics in no set order, so it may read the trigger first (it was refused,
`unknown_job`, and the run never came). It now holds the command until the definition comes
(then the run happens), across a crash, and refuses it with a reason once the hold is over."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from kadence.clock import ms_to_datetime
from kadence.models import Decision, PauseJob, Rejected, ResumeJob, TriggerNow
from kadence.timeengine.identity import manual_execution_id
from streams.runtime.loop import Runner
from streams.scheduler.held_commands import HELD_PER_JOB
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import applied_successes, once, settings_for


@pytest.fixture
def stack(driver: Driver, tmp_path: Path) -> DriverStack:
    return DriverStack(driver, settings_for(tmp_path / "state", partitions=1))


def trigger(stack: DriverStack, job_id: str, request_id: str) -> TriggerNow:
    issued = ms_to_datetime(stack.driver.now_ms())
    return TriggerNow(tenant="acme", job_id=job_id, request_id=request_id, issued_at=issued)


def schedules_held_back(stack: DriverStack, scheduler: Runner, *, held: bool) -> None:
    """The scheduler's consumer fetches `schedules` late (as librdkafka may, when both records
    come in one fetch or the schedules fetch is behind): what is on `commands` is read first."""
    tp = [TopicPartition(stack.topics.schedules, 0)]
    if held:
        scheduler.consumer.pause(tp)
    else:
        scheduler.consumer.resume(tp)


def rejected(stack: DriverStack) -> list[Rejected]:
    return stack.read(stack.topics.rejected, Rejected)


def test_create_then_trigger_runs_when_the_trigger_is_read_first(stack: DriverStack) -> None:
    scheduler = stack.scheduler()
    stack.worker()
    stack.settle()
    job = once("new", in_s=3_600)
    schedules_held_back(stack, scheduler, held=True)
    stack.put(job)  # written first, as POST /v1/jobs answers 201 before the trigger is sent
    stack.send(trigger(stack, "new", "r1"))
    stack.run_for(1_000)  # the trigger is read; the definition is not yet
    assert stack.executions() == []
    schedules_held_back(stack, scheduler, held=False)
    stack.run_for(1_000)
    run_id = manual_execution_id(job.key, "r1")
    assert [e.execution_id for e in stack.executions()] == [run_id]
    assert [o.execution_id for o in applied_successes(stack, "new")] == [run_id]
    assert rejected(stack) == []
    assert [h for h in stack.history("new") if h.decision is Decision.refused] == []


def test_a_held_command_survives_a_crash_its_offset_committed_past_it(
    driver: Driver, tmp_path: Path
) -> None:
    """The command's input offset is committed with it held in the store: a scheduler that
    restores the partition from the changelog alone (in memory) still has it."""
    stack = DriverStack(driver, settings_for(tmp_path / "state", partitions=1))
    first = stack.scheduler("a", in_memory=True)
    stack.worker()
    stack.settle()
    schedules_held_back(stack, first, held=True)
    stack.put(once("new", in_s=3_600))
    stack.send(trigger(stack, "new", "r1"))
    stack.run_for(1_000)
    group = driver.cluster.group(first.consumer.group_id)  # type: ignore[attr-defined]
    assert group.offsets[(stack.topics.commands, 0)][0] == 1  # not read again after a restart
    driver.crash(first)
    stack.scheduler("b", in_memory=True)
    stack.run_for(2_000)
    assert [e.execution_id for e in stack.executions()] == ["acme/new@manual:r1"]
    assert len(applied_successes(stack, "new")) == 1


def test_a_command_for_a_job_never_defined_is_refused_once_the_hold_is_over(
    driver: Driver, tmp_path: Path
) -> None:
    settings = settings_for(tmp_path / "state", partitions=1, command_hold_ms=5_000)
    stack = DriverStack(driver, settings)
    stack.scheduler()
    stack.settle()
    command = trigger(stack, "ghost", "r1").model_copy(update={"actor": "token:ops"})
    stack.send(command)
    stack.run_for(4_500)
    assert rejected(stack) == []  # still waiting: its definition may yet come
    stack.run_for(1_000)
    [refusal] = rejected(stack)
    assert (refusal.code, refusal.source_topic, refusal.offset) == (
        "unknown_job",
        stack.topics.commands,
        0,
    )
    assert "not read within 5000 ms" in refusal.reason
    [told] = stack.history("ghost")
    assert told.decision is Decision.refused
    assert told.reason.startswith("TriggerNow r1 refused: no job acme/ghost")
    assert told.details["actor"] == "token:ops"
    stack.put(once("ghost", in_s=3_600))  # defined now: the refused trigger does not run
    stack.scheduler("s1")
    stack.run_for(2_000)
    assert stack.executions() == []


def test_past_its_bounds_a_command_is_refused_at_once(driver: Driver, tmp_path: Path) -> None:
    stack = DriverStack(driver, settings_for(tmp_path / "state", partitions=1))
    stack.scheduler()
    stack.settle()
    for i in range(HELD_PER_JOB + 1):
        stack.send(trigger(stack, "ghost", f"r{i}"))
    stack.run_for(1_000)
    [refusal] = rejected(stack)
    assert refusal.code == "unknown_job" and refusal.offset == HELD_PER_JOB
    assert f"{HELD_PER_JOB} for this job" in refusal.reason
    stack.put(once("ghost", in_s=3_600))
    stack.run_for(2_000)
    ran = sorted(e.execution_id for e in stack.executions())
    assert ran == sorted(f"acme/ghost@manual:r{i}" for i in range(HELD_PER_JOB))


def test_with_no_hold_a_command_for_an_unknown_job_is_refused_at_once(
    driver: Driver, tmp_path: Path
) -> None:
    settings = settings_for(tmp_path / "state", partitions=1, command_hold_ms=0)
    stack = DriverStack(driver, settings)
    stack.scheduler()
    stack.settle()
    stack.send(trigger(stack, "ghost", "r1"))
    stack.settle()
    [refusal] = rejected(stack)
    assert (refusal.code, refusal.reason) == (
        "unknown_job",
        "no job acme/ghost on this partition (0)",
    )


def test_held_commands_apply_in_the_order_they_came(stack: DriverStack) -> None:
    scheduler = stack.scheduler()
    stack.settle()
    schedules_held_back(stack, scheduler, held=True)
    stack.put(once("new", in_s=3_600))
    issued = ms_to_datetime(stack.driver.now_ms())
    stack.send(PauseJob(tenant="acme", job_id="new", request_id="p", issued_at=issued))
    stack.send(ResumeJob(tenant="acme", job_id="new", request_id="r", issued_at=issued))
    stack.run_for(1_000)
    schedules_held_back(stack, scheduler, held=False)
    stack.run_for(1_000)
    told = [h.decision for h in stack.history("new")]
    assert told == [Decision.paused, Decision.resumed]
