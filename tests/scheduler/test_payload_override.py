"""A triggered run's own payload (TriggerNow's override) is the one its retries, its dead letter
and its replay carry (issue 17, item 7: they carried the job's payload), within a per-job
budget that refuses, with the reason, what would not fit the job's state."""

from __future__ import annotations

from typing import Any

import pytest

from kadence.models import (
    CancelRun,
    DeadLetter,
    ExecutionRequested,
    OutcomeStatus,
    ReplayDeadLetter,
    TriggerNow,
)
from streams.scheduler import commands, firing, outcomes
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.step import Effects, Refused
from tests.scheduler.test_domain import T0, cmd, create, ctx, definition, executions, outcome


def dead_letters(result: Effects) -> list[DeadLetter]:
    return [e.record for e in result.out if isinstance(e.record, DeadLetter)]


def triggered(payload: bytes, state: JobState | None = None, request: str = "t1") -> Effects:
    job = state or create(
        definition(
            payload=b"the job's",
            retry={"max_attempts": 2, "initial_backoff_ms": 1_000, "jitter": "none"},
        )
    )
    return commands.apply_command(
        job, cmd(TriggerNow, request_id=request, payload=payload), ctx(T0)
    )


def fail(state: JobState, ex: ExecutionRequested, now: int) -> Effects:
    return outcomes.apply_outcome(
        state, outcome(ex, OutcomeStatus.failed, retryable=True), ctx(now)
    )


def test_the_retry_and_the_dead_letter_and_the_replay_carry_the_run_s_payload() -> None:
    first = triggered(b"this run's")
    [ex] = executions(first)
    assert ex.payload == b"this run's"
    assert first.state is not None
    failed = fail(first.state, ex, T0 + 10)
    assert failed.state is not None
    retried = firing.on_due(failed.state, ctx(T0 + 1_010))
    [again] = executions(retried)
    assert (again.attempt, again.payload) == (2, b"this run's")  # on main: b"the job's"
    assert retried.state is not None
    dead = fail(retried.state, again, T0 + 2_000)
    [letter] = dead_letters(dead)
    assert letter.execution.payload == b"this run's"  # on main: b"the job's"
    assert dead.state is not None
    replay = ReplayDeadLetter(**cmd_fields("r1"), execution_id=ex.execution_id)
    replayed = commands.apply_command(dead.state, replay, ctx(T0 + 3_000))
    [run] = executions(replayed)
    assert (run.trigger, run.payload) == ("replay", b"this run's")


def test_a_first_attempt_dead_letter_says_it_was_triggered_by_hand() -> None:
    job = create(definition(payload=b"the job's", retry={"max_attempts": 1}))
    first = triggered(b"mine", job)
    [ex] = executions(first)
    assert first.state is not None
    [letter] = dead_letters(fail(first.state, ex, T0 + 10))
    assert (letter.execution.trigger, letter.execution.payload) == ("manual", b"mine")


def test_overrides_are_forgotten_when_their_run_is_done_and_kept_across_a_restore() -> None:
    first = triggered(b"x" * 100)
    assert first.state is not None
    restored = load_state(dump_state(first.state), first.state.definition_bytes)
    assert (
        restored.payloads
        == first.state.payloads
        == ((executions(first)[0].execution_id, b"x" * 100),)
    )
    ok = outcomes.apply_outcome(
        restored, outcome(executions(first)[0], OutcomeStatus.succeeded), ctx(T0 + 10)
    )
    assert ok.state is not None
    assert ok.state.payloads == ()


def test_an_override_the_state_has_no_room_for_is_refused_with_the_reason() -> None:
    limit = 700_000  # a small broker, for the test
    big = b"x" * 200_000
    job = create(definition(payload=b"the job's"))
    first = commands.apply_command(
        job, cmd(TriggerNow, request_id="t1", payload=big), ctx(T0, state_limit=limit)
    )
    assert first.state is not None
    with pytest.raises(Refused, match="does not fit in this job's state") as refused:
        commands.apply_command(
            first.state, cmd(TriggerNow, request_id="t2", payload=big), ctx(T0, state_limit=limit)
        )
    assert refused.value.code == "payload_override_too_large"
    ok = outcomes.apply_outcome(
        first.state, outcome(executions(first)[0], OutcomeStatus.succeeded), ctx(T0 + 10)
    )
    assert ok.state is not None  # the first run is done: its override is forgotten, room again
    again = commands.apply_command(
        ok.state, cmd(TriggerNow, request_id="t3", payload=big), ctx(T0, state_limit=limit)
    )
    assert executions(again)[0].payload == big


def cmd_fields(request_id: str) -> dict[str, Any]:
    base = cmd(TriggerNow, request_id=request_id)
    return {
        "tenant": base.tenant,
        "job_id": base.job_id,
        "request_id": base.request_id,
        "issued_at": base.issued_at,
    }


def test_cancelling_a_retry_forgets_its_override() -> None:
    first = triggered(b"mine")
    [ex] = executions(first)
    assert first.state is not None
    failed = fail(first.state, ex, T0 + 10)
    assert failed.state is not None
    assert failed.state.payloads  # kept for the retry
    cancel = CancelRun(**cmd_fields("c1"), execution_id=ex.execution_id)
    cancelled = commands.apply_command(failed.state, cancel, ctx(T0 + 20))
    assert cancelled.state is not None
    assert cancelled.state.payloads == ()


def test_a_dead_letter_replayed_to_a_job_now_on_a_json_target_is_refused_if_it_cannot_fit() -> None:
    """Issue 43, item 7: a letter replays with the job's target as it is now; when that is a
    `"format": "json"` Kafka topic whose envelope cannot hold the letter's payload, the replay
    is refused with the reason (it would only fail again); a payload that fits replays."""
    json_job = create(definition(target={"kind": "kafka", "topic": "out", "format": "json"}))
    for payload, refused in ((b"\x01" * 512 * 1024, True), (b"\x01" * 1024, False)):
        letter = executions(triggered(payload))[0]
        replay = ReplayDeadLetter(
            **cmd_fields("r1"), execution_id=letter.execution_id, letter=letter
        )
        if refused:
            with pytest.raises(Refused, match="JSON string") as why:
                commands.apply_command(json_job, replay, ctx(T0 + 3_000))
            assert why.value.code == "payload_too_large"
        else:
            replayed = commands.apply_command(json_job, replay, ctx(T0 + 3_000))
            assert [r.payload for r in executions(replayed)] == [payload]
