"""A job's own limits (issue 31): `max_runs` stops it after that many scheduled occurrences
(triggers and retries not counted; a new version with more runs on), and
`pause_after_failures` pauses it after that many runs in a row ended dead-lettered (a
success, or a resume, starts the count again). On the scheduler's pure logic, a fake clock."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.models import Decision, OutcomeStatus, PauseJob, ResumeJob, TriggerNow
from streams.scheduler import commands, definitions, outcomes
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.step import Delete, Effects, Sink
from tests.scheduler.test_domain import (
    CODEC,
    MIN,
    T0,
    create,
    ctx,
    decisions,
    definition,
    due,
    executions,
    history,
    outcome,
)


def run_minutes(state: JobState, first: int, last: int) -> tuple[JobState, list[Effects]]:
    """Wake the job at each minute first..last (the due times of `* * * * *`)."""
    seen = []
    for m in range(first, last + 1):
        result = due(state, T0 + m * MIN)
        assert result.state is not None
        state = result.state
        seen.append(result)
    return state, seen


def test_max_runs_stops_after_that_many_scheduled_runs_and_a_new_version_runs_on() -> None:
    state = create(definition(max_runs=3))
    trig = TriggerNow(
        tenant="acme", job_id="job", request_id="t1", issued_at=ms_to_datetime(T0 + 1)
    )
    triggered = commands.apply_command(state, trig, ctx(T0 + 1))
    assert triggered.state is not None and len(executions(triggered)) == 1  # not counted
    state, seen = run_minutes(triggered.state, 1, 6)
    fired = [ex.nominal_at for r in seen for ex in executions(r)]
    assert len(fired) == 3  # minutes 1, 2 and 3, then nothing
    counts = [
        h.details.get("runs_done") for r in seen for h in history(r) if h.decision is Decision.fired
    ]
    assert counts == ["1", "2", "3"]  # what the query view lists the runs left by
    [manual] = [h for h in history(triggered) if h.decision is Decision.fired]
    assert "runs_done" not in manual.details  # a trigger is not counted
    assert [d for r in seen for d in decisions(r) if d is Decision.completed] == [
        Decision.completed
    ]
    completed = next(h for r in seen for h in history(r) if h.decision is Decision.completed)
    assert completed.details == {"version": "1"} and "ran its 3 scheduled runs" in completed.reason
    assert state.next_due_ms is None and state.runs_done == 3
    again = load_state(dump_state(state), state.definition_bytes)  # the count is kept
    assert again.runs_done == 3
    more = definition(version=2, max_runs=5)
    raised = definitions.apply_definition(
        state, more, CODEC.encode(more), T0 + 7 * MIN, ctx(T0 + 7 * MIN)
    )
    assert raised.state is not None and raised.state.next_due_ms == T0 + 8 * MIN
    state, seen = run_minutes(raised.state, 8, 12)
    assert len([ex for r in seen for ex in executions(r)]) == 2  # up to 5 in all
    same = definition(version=3, max_runs=5, description="still 5")
    kept = definitions.apply_definition(
        state, same, CODEC.encode(same), T0 + 13 * MIN, ctx(T0 + 13 * MIN)
    )
    assert kept.state is not None and kept.state.next_due_ms is None
    assert [h.details for h in history(kept) if h.decision is Decision.completed] == [
        {"version": "3"}
    ]  # the view learns that version 3 is done too


def test_a_state_without_the_counters_reads_as_zero_and_stores_none() -> None:
    state = create(definition())
    stored = dump_state(state)
    assert b"runs_done" not in stored and b"failures_in_row" not in stored
    assert load_state(stored, state.definition_bytes).runs_done == 0


def fail_one(
    state: JobState, minute: int, status: OutcomeStatus = OutcomeStatus.failed
) -> tuple[JobState, Effects]:
    fired = due(state, T0 + minute * MIN)
    assert fired.state is not None
    [ex] = executions(fired)
    result = outcomes.apply_outcome(fired.state, outcome(ex, status), ctx(T0 + minute * MIN + 1))
    assert result.state is not None
    return result.state, result


def test_pause_after_failures_pauses_after_n_in_a_row_and_a_success_resets() -> None:
    state = create(definition(pause_after_failures=3, retry={"max_attempts": 1}))
    state, _ = fail_one(state, 1)
    state, _ = fail_one(state, 2)
    state, _ = fail_one(state, 3, OutcomeStatus.succeeded)  # the count starts again
    assert state.failures_in_row == 0
    state, _ = fail_one(state, 4)
    state, _ = fail_one(state, 5)
    assert not state.paused and state.failures_in_row == 2
    state, third = fail_one(state, 6)
    assert state.paused
    paused = [h for h in history(third) if h.decision is Decision.paused]
    assert len(paused) == 1
    assert "paused after 3 runs in a row failed (pause_after_failures=3)" in paused[0].reason
    assert "acme/job@" in paused[0].reason  # the last failed run, and its error
    skipped = due(state, T0 + 7 * MIN)
    assert executions(skipped) == [] and Decision.skipped_paused in decisions(skipped)
    resume = ResumeJob(
        tenant="acme", job_id="job", request_id="r", issued_at=ms_to_datetime(T0 + 7 * MIN + 5)
    )
    resumed = commands.apply_command(state, resume, ctx(T0 + 7 * MIN + 5))
    assert resumed.state is not None and resumed.state.failures_in_row == 0
    state, _one_more = fail_one(resumed.state, 8)
    assert not state.paused  # one failure after a resume is one, not four


def test_without_the_setting_failures_never_pause_and_a_pause_command_still_works() -> None:
    state = create(definition(retry={"max_attempts": 1}))
    for m in range(1, 6):
        state, _ = fail_one(state, m)
    assert not state.paused and state.failures_in_row == 5
    pause = PauseJob(
        tenant="acme",
        job_id="job",
        request_id="p",
        issued_at=ms_to_datetime(T0 + 6 * MIN),
        reason="ops",
    )
    paused = commands.apply_command(state, pause, ctx(T0 + 6 * MIN))
    assert paused.state is not None and paused.state.paused
    assert [h.reason for h in history(paused) if h.decision is Decision.paused] == ["ops"]


def test_a_one_off_deletes_itself_once_its_run_ended_and_a_cron_job_never_does() -> None:
    once = definition(
        schedule={"kind": "once", "run_at": ms_to_datetime(T0 + MIN)},
        delete_after_completion=True,
        retry={"max_attempts": 2},
    )
    state = create(once)
    fired = due(state, T0 + MIN)
    assert fired.state is not None
    assert not [e for e in fired.out if e.sink is Sink.schedules]  # it has not run yet
    [ex] = executions(fired)
    failed = outcomes.apply_outcome(
        fired.state, outcome(ex, OutcomeStatus.failed, retryable=True), ctx(T0 + MIN + 1)
    )
    assert failed.state is not None
    assert not [e for e in failed.out if e.sink is Sink.schedules]  # a retry is to come
    retried = due(failed.state, T0 + 2 * MIN)
    assert retried.state is not None
    [again] = executions(retried)
    ok = outcomes.apply_outcome(
        retried.state, outcome(again, OutcomeStatus.succeeded), ctx(T0 + 2 * MIN + 1)
    )
    assert [e.record for e in ok.out if e.sink is Sink.schedules] == [Delete("acme/job")]
    [done] = [h for h in history(ok) if h.decision is Decision.completed]
    assert done.details == {"version": "1", "deleted": "true"}
    cron = create(definition(delete_after_completion=True, retry={"max_attempts": 1}))
    for m in range(1, 4):
        cron, result = fail_one(cron, m, OutcomeStatus.succeeded)
        assert not [e for e in result.out if e.sink is Sink.schedules]
