"""What the scheduler does with the execution path's outcomes: duplicates, the redelivery
cap, dead-letter replay, and cancelling a run in flight."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.models import (
    CancelRun,
    Decision,
    ErrorInfo,
    ExecutionRequested,
    ExecutionRevoked,
    OutcomeStatus,
    ReplayDeadLetter,
    TriggerKind,
)
from kadence.models.records import DeadLetter
from streams.scheduler import commands, dispatch, outcomes
from streams.scheduler.entries import Running
from streams.scheduler.step import Effects, Shot
from tests.scheduler.test_domain import (
    MIN,
    T0,
    _ex_fields,
    create,
    ctx,
    decisions,
    definition,
    due,
    executions,
    outcome,
)


def dead(result: Effects) -> list[DeadLetter]:
    return [e.record for e in result.out if isinstance(e.record, DeadLetter)]


def common() -> dict[str, object]:
    return {"tenant": "acme", "job_id": "job", "issued_at": ms_to_datetime(T0)}


def test_a_second_outcome_of_the_same_attempt_is_recorded_not_applied() -> None:
    fired = due(create(definition(retry={"max_attempts": 3})), T0 + MIN)
    [ex] = executions(fired)
    assert fired.state is not None
    failed = outcome(ex, OutcomeStatus.failed, retryable=True)
    first = outcomes.apply_outcome(fired.state, failed, ctx(T0 + MIN + 1_000))
    assert first.state is not None
    assert len(first.state.retries) == 1
    again = outcomes.apply_outcome(first.state, failed, ctx(T0 + MIN + 2_000))
    assert again.state is not None
    assert len(again.state.retries) == 1  # not a second retry of the same failure
    assert decisions(again) == [Decision.failed]
    assert again.out[0].record.details == {"stale": "true"}  # type: ignore[union-attr]


def test_the_reapers_give_up_dead_letters_as_redelivery_cap() -> None:
    fired = due(create(), T0 + MIN)
    [ex] = executions(fired)
    assert fired.state is not None
    capped = outcome(ex, OutcomeStatus.failed).model_copy(
        update={"error": ErrorInfo(type="RedeliveryCap", message="killed 3 workers")}
    )
    result = outcomes.apply_outcome(fired.state, capped, ctx(T0 + MIN + 1_000))
    [letter] = dead(result)
    assert letter.reason == "redelivery_cap"
    assert result.state is not None
    assert [p.execution_id for p in result.state.dead] == [ex.execution_id]


def test_replay_runs_a_dead_letter_again_with_a_fresh_retry_budget() -> None:
    fired = due(create(definition(retry={"max_attempts": 1})), T0 + MIN)
    [ex] = executions(fired)
    assert fired.state is not None
    gone = outcomes.apply_outcome(fired.state, outcome(ex, OutcomeStatus.failed), ctx(T0 + MIN + 1))
    assert gone.state is not None
    assert len(dead(gone)) == 1
    assert gone.dead_delta == 1  # the dead-letter depth metric counts it ...
    replay = ReplayDeadLetter(request_id="r1", **common())
    result = commands.apply_command(gone.state, replay, ctx(T0 + 2 * MIN - 1))
    [again] = executions(result)
    assert (again.execution_id, again.attempt, again.trigger) == (ex.execution_id, 1, "replay")
    assert result.state is not None
    assert result.state.dead == ()
    assert result.dead_delta == -1  # ... until it is replayed
    # its outcome applies (the earlier attempt-1 outcome does not make it a duplicate)
    ok = outcomes.apply_outcome(
        result.state, outcome(again, OutcomeStatus.succeeded), ctx(T0 + 2 * MIN)
    )
    assert decisions(ok) == []  # applied: a success writes no history (a stale one would)
    assert ok.state is not None
    assert again.execution_id in {r.execution_id for r in result.state.running}
    assert again.execution_id not in {r.execution_id for r in ok.state.running}
    nothing = commands.apply_command(
        result.state,
        ReplayDeadLetter(request_id="r2", **common()),
        ctx(T0 + 2 * MIN),
    )
    assert executions(nothing) == []
    assert "not among this job's recent dead letters" in (nothing.out[0].record.reason or "")  # type: ignore[union-attr]


def test_cancelling_a_running_execution_tells_its_worker() -> None:
    fired = due(create(), T0 + MIN)
    [ex] = executions(fired)
    assert fired.state is not None
    cancel = CancelRun(request_id="c", execution_id=ex.execution_id, **common())
    result = commands.apply_command(fired.state, cancel, ctx(T0 + MIN + 500))
    [rev] = [e.record for e in result.out if isinstance(e.record, ExecutionRevoked)]
    assert rev.execution_id == ex.execution_id
    assert decisions(result) == [Decision.cancel_requested]


def test_an_outcome_frees_its_run_wherever_it_is_in_running_and_only_it() -> None:
    """Outcomes come in any order: the run leaves `running` from the front, the middle or the
    end; the others stay in order; a run listed twice (never written so, but read back from
    an old state) leaves whole."""
    state = create()
    runs = tuple(
        Running(f"acme/job@2026-12-01T09:0{i}:00.000Z", T0 + i * MIN, 1, T0 + 9 * MIN)
        for i in range(1, 4)
    )
    for gone in range(3):
        ex = ExecutionRequested.model_validate(
            {**_ex_fields(runs[gone].execution_id, runs[gone].nominal_ms)}
        )
        done = outcomes.apply_outcome(
            state.evolve(running=runs), outcome(ex, OutcomeStatus.succeeded), ctx(T0 + 5 * MIN)
        )
        assert done.state is not None
        assert done.state.running == runs[:gone] + runs[gone + 1 :]
    twice = state.evolve(running=(runs[0], runs[1], runs[0]))
    ex = ExecutionRequested.model_validate({**_ex_fields(runs[0].execution_id, T0 + MIN)})
    done = outcomes.apply_outcome(twice, outcome(ex, OutcomeStatus.succeeded), ctx(T0 + 5 * MIN))
    assert done.state is not None
    assert done.state.running == (runs[1],)


def test_a_run_expiring_at_this_instant_leaves_running_when_another_fires() -> None:
    """Firing drops the runs whose timeout and lease have passed, up to this very instant
    (they stay unsettled: a late outcome is still applied); a run expiring a millisecond later
    stays."""
    now = T0 + 5 * MIN
    gone = Running("acme/job@2026-12-01T09:01:00.000Z", T0 + MIN, 1, now)
    kept = Running("acme/job@2026-12-01T09:02:00.000Z", T0 + 2 * MIN, 1, now + 1)
    state = create().evolve(running=(gone, kept))
    shot = Shot("acme/job@manual:r1", now, now, TriggerKind.manual)
    after = dispatch.fire(state, Effects(state), ctx(now), shot)
    assert [r.execution_id for r in after.running] == [kept.execution_id, shot.execution_id]
    assert after.unsettled == (gone.execution_id,)
