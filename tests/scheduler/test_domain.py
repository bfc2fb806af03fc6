"""The scheduler's decisions on a fake clock: every input, command and policy."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    Backfill,
    CancelRun,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    KafkaTarget,
    OutcomeStatus,
    PauseJob,
    ResumeJob,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.models.records import DeadLetter
from streams.scheduler import catchup, commands, definitions, firing, outcomes
from streams.scheduler.paused import PAUSED_LISTED
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.step import Effects, Facts, Refused, Sink

CODEC = Codec()
T0 = datetime_to_ms(datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC))  # a whole minute
MIN = 60_000


def definition(**kw: Any) -> ScheduleDefinition:
    base: dict[str, Any] = {
        "tenant": "acme",
        "job_id": "job",
        "version": 1,
        "schedule": {"kind": "cron", "spread_s": 0, "expression": "* * * * *"},
        "target": KafkaTarget(topic="out"),
        "overlap": "allow",
    }
    base.update(kw)
    return ScheduleDefinition.model_validate(base)


def ctx(now: int, **kw: Any) -> Facts:
    return Facts(now, CODEC, "2025b", **kw)


def create(d: ScheduleDefinition | None = None, at: int = T0) -> JobState:
    d = d or definition()
    result = definitions.apply_definition(None, d, CODEC.encode(d), at, ctx(at))
    assert result.state is not None
    return result.state


def executions(result: Effects) -> list[ExecutionRequested]:
    return [e.record for e in result.out if isinstance(e.record, ExecutionRequested)]


def history(result: Effects) -> list[HistoryRecord]:
    return [e.record for e in result.out if isinstance(e.record, HistoryRecord)]


def decisions(result: Effects) -> list[Decision]:
    return [h.decision for h in history(result)]


def due(state: JobState, now: int, **kw: Any) -> Effects:
    return firing.on_due(state, ctx(now, **kw))


def outcome(
    ex: ExecutionRequested, status: OutcomeStatus, retryable: bool = False
) -> ExecutionOutcome:
    return ExecutionOutcome(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        attempt=ex.attempt,
        delivery=1,
        worker_id="w",
        status=status,
        retryable=retryable,
        error=None if status is OutcomeStatus.succeeded else ErrorInfo(type="E", message="boom"),
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        started_at=ex.due_at,
        finished_at=ex.due_at,
    )


# --- definitions -----------------------------------------------------------------------------


def test_a_new_cron_job_is_due_at_its_next_occurrence_after_creation() -> None:
    state = create(at=T0 + 5_000)
    assert state.cursor_ms == T0 + 5_000
    assert state.next_nominal_ms == state.next_due_ms == T0 + MIN
    assert state.wake_ms == T0 + MIN


def test_never_early_and_fire_and_advance() -> None:
    state = create()
    early = due(state, T0 + MIN - 1)
    assert executions(early) == []
    result = due(state, T0 + MIN)
    [ex] = executions(result)
    assert ex.execution_id == "acme/job@2026-12-01T09:01:00.000Z"
    assert ex.nominal_at == ex.due_at == ms_to_datetime(T0 + MIN)
    assert ex.dispatched_at >= ex.due_at
    assert (ex.attempt, ex.delivery, ex.trigger) == (1, 1, "schedule")
    assert decisions(result) == [Decision.fired]
    assert result.state is not None
    assert result.state.cursor_ms == T0 + MIN
    assert result.state.next_due_ms == T0 + 2 * MIN
    assert result.state.fired == 1


def test_a_one_off_created_late_still_fires_inside_the_window() -> None:
    d = definition(schedule={"kind": "once", "run_at": ms_to_datetime(T0)})
    state = create(d, at=T0 + 2_000)
    assert state.wake_ms == T0
    [ex] = executions(due(state, T0 + 2_000))
    assert ex.execution_id == "acme/job@2026-12-01T09:00:00.000Z"


def test_updates_need_a_newer_version() -> None:
    state = create()
    same = definition()
    with pytest.raises(Refused) as err:
        definitions.apply_definition(state, same, CODEC.encode(same), T0, ctx(T0))
    assert err.value.code == "stale_version"
    newer = definition(
        version=2, schedule={"kind": "cron", "spread_s": 0, "expression": "*/5 * * * *"}
    )
    result = definitions.apply_definition(state, newer, CODEC.encode(newer), T0, ctx(T0))
    assert result.state is not None
    assert result.state.next_due_ms == T0 + 5 * MIN  # recomputed from the same cursor
    assert result.state.cursor_ms == state.cursor_ms


def test_delete_leaves_nothing_behind() -> None:
    result = definitions.apply_delete(create(), ctx(T0))
    assert result.state is None
    assert decisions(result) == [Decision.deleted]


def test_a_paused_definition_does_not_fire() -> None:
    state = create(definition(paused=True))
    assert state.wake_ms == T0 + MIN
    result = due(state, T0 + MIN)
    assert executions(result) == []
    assert decisions(result) == [Decision.skipped_paused]


# --- overlap ---------------------------------------------------------------------------------


def _running(d: ScheduleDefinition) -> JobState:
    result = due(create(d), T0 + MIN)
    assert len(executions(result)) == 1
    assert result.state is not None
    return result.state


def test_overlap_skip() -> None:
    state = _running(definition(overlap="skip"))
    result = due(state, T0 + 2 * MIN)
    assert executions(result) == []
    assert decisions(result) == [Decision.skipped_overlap]
    assert result.state is not None
    assert result.state.skipped == 1
    assert result.state.cursor_ms == T0 + 2 * MIN  # the cursor still moves on


def test_overlap_allow() -> None:
    state = _running(definition(overlap="allow"))
    assert len(executions(due(state, T0 + 2 * MIN))) == 1


def test_overlap_buffer_one_runs_the_buffered_one_when_the_running_one_ends() -> None:
    state = _running(definition(overlap="buffer_one"))
    first = state.running[0]
    r2 = due(state, T0 + 2 * MIN)
    assert decisions(r2) == [Decision.buffered]
    assert r2.state is not None
    r3 = due(r2.state, T0 + 3 * MIN)
    assert decisions(r3) == [Decision.skipped_overlap]  # only one may wait
    assert r3.state is not None
    ex1 = ExecutionRequested.model_validate({**_ex_fields(first.execution_id, T0 + MIN)})
    done = outcomes.apply_outcome(
        r3.state, outcome(ex1, OutcomeStatus.succeeded), ctx(T0 + 3 * MIN + 5)
    )
    [ex] = executions(done)
    assert ex.execution_id == "acme/job@2026-12-01T09:02:00.000Z"
    assert decisions(done) == [Decision.fired]  # a success writes no history record


def _ex_fields(exec_id: str, nominal: int) -> dict[str, Any]:
    return {
        "execution_id": exec_id,
        "tenant": "acme",
        "job_id": "job",
        "definition_version": 1,
        "nominal_at": ms_to_datetime(nominal),
        "due_at": ms_to_datetime(nominal),
        "dispatched_at": ms_to_datetime(nominal),
        "target": KafkaTarget(topic="out"),
        "timeout_ms": 300_000,
        "lease_ttl_ms": 30_000,
    }


def test_overlap_buffer_all_is_bounded() -> None:
    state = _running(definition(overlap="buffer_all", max_buffered=2))
    got = []
    for i in range(2, 6):
        result = due(state, T0 + i * MIN)
        got.extend(decisions(result))
        assert result.state is not None
        state = result.state
    assert got == [
        Decision.buffered,
        Decision.buffered,
        Decision.skipped_overlap,
        Decision.skipped_overlap,
    ]
    assert len(state.buffered) == 2


def test_overlap_cancel_other() -> None:
    state = _running(definition(overlap="cancel_other"))
    result = due(state, T0 + 2 * MIN)
    assert decisions(result) == [Decision.cancel_requested, Decision.fired]
    assert result.state is not None
    assert [r.nominal_ms for r in result.state.running] == [T0 + 2 * MIN]


def test_a_busy_concurrency_group_counts_as_overlap() -> None:
    state = create(definition(overlap="skip", concurrency_key="ledger"))
    result = due(state, T0 + MIN, group_busy=True)
    assert decisions(result) == [Decision.skipped_overlap]


def test_a_run_that_never_reports_stops_blocking_after_timeout_plus_lease() -> None:
    d = definition(overlap="skip", timeout_ms=60_000, lease_ttl_ms=30_000)
    state = _running(d)
    assert decisions(due(state, T0 + 2 * MIN)) == [Decision.skipped_overlap]
    later = state.evolve(
        next_due_ms=T0 + 3 * MIN, next_nominal_ms=T0 + 3 * MIN, cursor_ms=T0 + 2 * MIN
    )
    assert decisions(due(later, T0 + 3 * MIN)) == [Decision.fired]  # 60 s + 30 s after 09:01


# --- missed runs -----------------------------------------------------------------------------


def _after_downtime(mode: str, minutes: int = 5, **missed: Any) -> Effects:
    state = create(definition(missed={"mode": mode, **missed}))
    return due(state, T0 + minutes * MIN + 40_000)  # five occurrences, all late (grace 30 s)


def test_missed_latest_once() -> None:
    result = _after_downtime("latest_once")
    [ex] = executions(result)
    assert ex.execution_id.endswith("09:05:00.000Z")
    assert ex.trigger == "catch_up"
    assert decisions(result).count(Decision.coalesced) == 4


def test_missed_all() -> None:
    result = _after_downtime("all")
    assert [e.execution_id[-13:-5] for e in executions(result)] == [
        "09:01:00",
        "09:02:00",
        "09:03:00",
        "09:04:00",
        "09:05:00",
    ]


def test_missed_all_is_bounded() -> None:
    result = _after_downtime("all", max_catch_up=2)
    assert len(executions(result)) == 2
    assert decisions(result).count(Decision.missed) == 3


def test_missed_none() -> None:
    result = _after_downtime("none")
    assert executions(result) == []
    assert decisions(result) == [Decision.missed] * 5
    assert result.state is not None
    assert result.state.missed == 5
    assert result.state.next_due_ms == T0 + 6 * MIN


def test_outside_the_catch_up_window_is_missed_whatever_the_mode() -> None:
    result = _after_downtime("all", catch_up_window_ms=2 * MIN)
    assert len(executions(result)) == 2  # 09:04 and 09:05 are inside 2 minutes of 09:05:40
    assert decisions(result).count(Decision.missed) == 3


def test_a_long_outage_lists_a_bounded_number_of_misses() -> None:
    d = definition(
        schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"},
        missed={"mode": "none"},
    )
    now = T0 + 2 * 3600 * 1000  # a per-second job, two hours down; the window is one hour
    result = due(create(d), now)
    missed = [h for h in history(result) if h.decision is Decision.missed]
    assert len(missed) == catchup.MISSED_LISTED + 2
    listed, ranged, summary = missed[:-2], missed[-2], missed[-1]
    assert all(h.execution_id for h in listed)
    assert ranged.details["range_to"] == str(now - 3600 * 1000)
    # inside the window (3 601 occurrences, both ends included) the ones due within the grace
    # (30 s) are on time and fire; the rest are late (mode none) or over max_catch_up
    fired = executions(result)
    assert len(fired) == 31
    assert min(e.nominal_at for e in fired) == ms_to_datetime(now - 30_000)
    assert summary.details == {"unlisted": str(3601 - 31)}
    assert result.state is not None
    assert result.state.missed == catchup.MISSED_LISTED + 3601 - 31
    assert result.state.next_due_ms == now + 1000


def test_on_time_occurrences_are_not_late() -> None:
    result = due(create(definition(missed={"mode": "none"})), T0 + MIN + 2_000)
    assert len(executions(result)) == 1


def test_a_dst_skipped_occurrence_gets_a_history_record() -> None:
    spring = datetime_to_ms(datetime(2026, 3, 8, 6, 0, tzinfo=UTC))  # 01:00 EST in New York
    d = definition(
        schedule={
            "kind": "cron",
            "expression": "30 2 * * *",
            "timezone": "America/New_York",
            "dst_gap": "skip",
        },
    )
    state = create(d, at=spring)
    assert state.next_nominal_ms == datetime_to_ms(datetime(2026, 3, 9, 6, 30, tzinfo=UTC))
    result = due(state, state.next_due_ms or 0)
    assert decisions(result) == [Decision.skipped_dst, Decision.fired]
    [skip] = [h for h in history(result) if h.decision is Decision.skipped_dst]
    assert skip.reason.startswith("2026-03-08 02:30:00 local does not exist")


# --- commands --------------------------------------------------------------------------------


def cmd(kind: type, **kw: Any) -> Any:
    return kind(tenant="acme", job_id="job", issued_at=ms_to_datetime(T0), **kw)


def test_each_occurrence_due_while_paused_is_skipped_at_its_due_time() -> None:
    """Issue 17, item 6: on main nothing was recorded until the resume, and then as `missed`
    or `coalesced` under the missed policy (latest_once even ran one)."""
    state = create(definition(missed={"mode": "latest_once"}))
    paused = commands.apply_command(state, cmd(PauseJob, request_id="p1"), ctx(T0 + 1))
    assert decisions(paused) == [Decision.paused]
    assert paused.state is not None
    s = paused.state
    for minute in (1, 2, 3):
        assert s.wake_ms == T0 + minute * MIN
        result = due(s, T0 + minute * MIN)
        assert executions(result) == []
        [skip] = history(result)
        assert skip.decision is Decision.skipped_paused
        assert skip.at == skip.due_at == ms_to_datetime(T0 + minute * MIN)  # at its due time
        assert skip.execution_id is not None and skip.execution_id.endswith(f"09:0{minute}:00.000Z")
        assert result.state is not None
        s = result.state
    resume = cmd(ResumeJob, request_id="r1")
    resumed = commands.apply_command(s, resume, ctx(T0 + 3 * MIN + 5_000))
    assert executions(resumed) == []  # nothing is caught up: the pause skipped them
    assert decisions(resumed) == [Decision.resumed]
    assert resumed.state is not None
    assert {T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN} <= set(resumed.state.undispatched)  # backfill
    [ex] = executions(due(resumed.state, T0 + 4 * MIN))
    assert ex.trigger == "schedule"


def test_a_resume_records_what_fell_due_that_no_wake_saw_yet() -> None:
    state = create(definition(missed={"mode": "none"}))
    paused = commands.apply_command(state, cmd(PauseJob, request_id="p1"), ctx(T0 + MIN - 2_000))
    assert paused.state is not None
    resumed = commands.apply_command(
        paused.state, cmd(ResumeJob, request_id="r1"), ctx(T0 + MIN + 3_000)
    )
    assert executions(resumed) == []
    assert decisions(resumed) == [Decision.skipped_paused, Decision.resumed]


def test_a_pause_decides_first_about_what_was_already_due() -> None:
    state = create(definition())
    paused = commands.apply_command(state, cmd(PauseJob, request_id="p1"), ctx(T0 + MIN + 500))
    [ex] = executions(paused)  # due 500 ms before the pause: it runs, on time
    assert ex.trigger == "schedule"
    assert decisions(paused) == [Decision.fired, Decision.paused]


def test_a_long_outage_while_paused_is_listed_then_summarised_and_still_backfillable() -> None:
    state = create(
        definition(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"})
    )
    paused = commands.apply_command(state, cmd(PauseJob, request_id="p1"), ctx(T0 + 1))
    assert paused.state is not None
    result = due(paused.state, T0 + 3_600_000)  # the scheduler was down for an hour
    skips = [h for h in history(result) if h.decision is Decision.skipped_paused]
    assert len(skips) == PAUSED_LISTED + 1  # one by one, then one record for the range
    assert "not listed one by one" in (skips[-1].reason or "")
    assert result.state is not None
    # every occurrence up to now is handled: the range ends before the next one, still to come
    assert result.state.next_due_ms == T0 + 3_601_000
    assert result.state.gaps == ((T0 + PAUSED_LISTED * 1_000, T0 + 3_601_000),)


def test_trigger_now_is_idempotent_by_request_id() -> None:
    state = create()
    first = commands.apply_command(
        state, cmd(TriggerNow, request_id="t1", payload=b"x"), ctx(T0 + 7)
    )
    [ex] = executions(first)
    assert ex.execution_id == "acme/job@manual:t1"
    assert ex.trigger == "manual"
    assert ex.payload == b"x"
    assert first.state is not None
    again = commands.apply_command(first.state, cmd(TriggerNow, request_id="t1"), ctx(T0 + 9))
    assert again.out == []


def test_backfill_fires_what_was_never_dispatched_and_refuses_the_rest() -> None:
    state: JobState | None = create(
        definition(missed={"mode": "none"}, overlap="allow"), at=T0 - 10 * MIN
    )
    for at in (T0 - 9 * MIN + 100, T0 - 8 * MIN + 100, T0 - 3 * MIN - 20_000):
        assert state is not None  # 08:51 and 08:52 on time, then down until 08:56:40
        state = firing.on_due(state, ctx(at)).state
    assert state is not None
    window = cmd(
        Backfill,
        request_id="b1",
        start=ms_to_datetime(T0 - 30 * MIN),
        end=ms_to_datetime(T0 + 30 * MIN),
    )
    result = commands.apply_command(state, window, ctx(T0))
    fired = {datetime_to_ms(e.nominal_at) for e in executions(result)}
    skipped = {
        datetime_to_ms(h.nominal_at)
        for h in history(result)
        if h.decision is Decision.skipped_dispatched and h.nominal_at
    }
    assert min(fired) == T0 - 30 * MIN  # before the job existed: never dispatched
    assert skipped == {T0 - 9 * MIN, T0 - 8 * MIN}  # dispatched on time
    assert {T0 - 7 * MIN, T0 - 6 * MIN, T0 - 5 * MIN, T0 - 4 * MIN} <= fired  # missed
    assert max(fired) <= state.cursor_ms  # never ahead of the cursor: that would be early
    assert all(e.trigger == "backfill" for e in executions(result))
    forced = commands.apply_command(
        state, Backfill(**{**window.model_dump(), "request_id": "b2", "force": True}), ctx(T0)
    )
    assert {T0 - 9 * MIN, T0 - 8 * MIN} <= {
        datetime_to_ms(e.nominal_at) for e in executions(forced)
    }
    assert result.state is not None  # a second backfill leaves out what the first one fired
    again = commands.apply_command(
        result.state, Backfill(**{**window.model_dump(), "request_id": "b3"}), ctx(T0)
    )
    assert executions(again) == []
    assert decisions(again).count(Decision.skipped_dispatched) == len(fired) + 2


def test_cancel_a_buffered_run_and_request_cancel_of_a_running_one() -> None:
    state = _running(definition(overlap="buffer_one"))
    buffered = due(state, T0 + 2 * MIN).state
    assert buffered is not None
    target = buffered.buffered[0].execution_id
    result = commands.apply_command(
        buffered, cmd(CancelRun, request_id="c1", execution_id=target), ctx(T0 + 2 * MIN)
    )
    assert decisions(result) == [Decision.cancelled]
    assert result.state is not None
    assert result.state.buffered == ()
    running = buffered.running[0].execution_id
    result2 = commands.apply_command(
        buffered, cmd(CancelRun, request_id="c2", execution_id=running), ctx(T0 + 2 * MIN)
    )
    assert decisions(result2) == [Decision.cancel_requested]


# --- outcomes --------------------------------------------------------------------------------


def _first_run(**kw: Any) -> tuple[JobState, ExecutionRequested]:
    result = due(create(definition(**kw)), T0 + MIN)
    assert result.state is not None
    return result.state, executions(result)[0]


def test_retry_with_backoff_then_dead_letter() -> None:
    state, ex = _first_run(retry={"max_attempts": 2, "initial_backoff_ms": 1_000})
    failed = outcomes.apply_outcome(
        state, outcome(ex, OutcomeStatus.failed, retryable=True), ctx(T0 + MIN + 500)
    )
    assert decisions(failed) == [Decision.retry_scheduled]
    assert failed.state is not None
    [pending] = failed.state.retries
    assert T0 + MIN + 500 <= pending.due_ms <= T0 + MIN + 1_500  # full jitter in [0, 1 s]
    assert failed.state.wake_ms == min(pending.due_ms, T0 + 2 * MIN)
    retried = due(failed.state, pending.due_ms)
    [ex2] = executions(retried)
    assert (ex2.execution_id, ex2.attempt, ex2.trigger) == (ex.execution_id, 2, "retry")
    assert retried.state is not None
    final = outcomes.apply_outcome(
        retried.state, outcome(ex2, OutcomeStatus.failed, retryable=True), ctx(pending.due_ms + 10)
    )
    [dead] = [e.record for e in final.out if isinstance(e.record, DeadLetter)]
    assert dead.reason == "retries_exhausted"
    assert dead.execution.execution_id == ex.execution_id
    assert decisions(final) == [Decision.dead_lettered]


def test_not_retryable_goes_straight_to_dead_letter() -> None:
    state, ex = _first_run()
    result = outcomes.apply_outcome(state, outcome(ex, OutcomeStatus.failed), ctx(T0 + MIN + 5))
    assert [e.sink for e in result.out] == [Sink.dead_letter, Sink.history]


def test_an_error_as_long_as_an_outcome_holds_is_cut_in_history_not_a_crash() -> None:
    """A target's error may hold 4 096 characters (a 503's body quoted); the history reasons
    that quote it hold 2 048: before, the scheduler raised building them."""
    state, ex = _first_run(retry={"max_attempts": 2, "initial_backoff_ms": 1_000})
    long = outcome(ex, OutcomeStatus.failed, retryable=True).model_copy(
        update={"error": ErrorInfo.cut("HttpStatus", "503 Service Unavailable: " + "x" * 5_000)}
    )
    retrying = outcomes.apply_outcome(state, long, ctx(T0 + MIN + 500))
    [told] = history(retrying)
    assert told.decision is Decision.retry_scheduled
    assert len(told.reason) == 2_048 and told.reason.startswith("attempt 1 failed: 503")
    assert retrying.state is not None
    [pending] = retrying.state.retries
    retried = due(retrying.state, pending.due_ms)
    [ex2] = executions(retried)
    assert retried.state is not None
    final = outcomes.apply_outcome(
        retried.state, long.model_copy(update={"attempt": ex2.attempt}), ctx(pending.due_ms + 10)
    )
    assert decisions(final) == [Decision.dead_lettered]
    assert len(history(final)[0].reason) == 2_048


def test_backoff_is_deterministic_and_bounded() -> None:
    state, _ = _first_run(
        retry={"initial_backoff_ms": 1_000, "max_backoff_ms": 5_000, "multiplier": 3}
    )
    c = ctx(T0)
    caps = [1_000, 3_000, 5_000, 5_000, 5_000]
    values = [outcomes.backoff_ms(state, c, "x", n) for n in range(1, 6)]
    assert values == [outcomes.backoff_ms(state, c, "x", n) for n in range(1, 6)]
    assert all(0 <= v <= cap for v, cap in zip(values, caps, strict=True))
    # full jitter: uniform in [0, cap] across executions, not pinned to 0 or to the cap
    spread = [outcomes.backoff_ms(state, c, f"acme/j@{i}", 2) for i in range(2_000)]
    assert min(spread) < 0.05 * 3_000 and max(spread) > 0.95 * 3_000
    assert 0.45 * 3_000 < sum(spread) / len(spread) < 0.55 * 3_000
    assert len(set(spread)) > 1_000
    assert spread[:20] != [outcomes.backoff_ms(state, c, f"acme/j@{i}", 3) for i in range(20)]
    # no jitter: the exponential ceilings themselves
    exact, _ = _first_run(
        retry={
            "initial_backoff_ms": 1_000,
            "max_backoff_ms": 5_000,
            "multiplier": 3,
            "jitter": "none",
        }
    )
    assert [outcomes.backoff_ms(exact, c, "x", n) for n in range(1, 6)] == caps


def test_a_late_outcome_of_an_older_attempt_does_not_overwrite() -> None:
    state, ex = _first_run()
    newer = state.evolve(
        running=(
            state.running[0].__class__(
                ex.execution_id, state.running[0].nominal_ms, 3, T0 + 10 * MIN
            ),
        )
    )
    result = outcomes.apply_outcome(newer, outcome(ex, OutcomeStatus.failed), ctx(T0 + MIN + 5))
    assert result.state is newer
    [h] = history(result)
    assert h.details == {"stale": "true"}


def test_state_round_trips_through_its_stored_form() -> None:
    state, _ = _first_run(overlap="buffer_one")
    state = state.evolve(request_ids=("a", "b"), undispatched=(1, 2))
    assert load_state(dump_state(state), state.definition_bytes) == state


def test_a_tz_database_update_recomputes_and_reports_a_moved_occurrence() -> None:
    state = create().evolve(tzdb="2020a", next_nominal_ms=T0 + 5 * MIN, next_due_ms=T0 + 5 * MIN)
    result = definitions.apply_tzdb(state, ctx(T0))
    assert result.state is not None
    assert result.state.tzdb == "2025b"
    assert result.state.next_nominal_ms == T0 + MIN
    [h] = history(result)
    assert h.decision is Decision.rescheduled
    assert "tz database 2020a -> 2025b" in h.reason
    unchanged = definitions.apply_tzdb(create().evolve(tzdb="2020a"), ctx(T0))
    assert history(unchanged) == []
    assert unchanged.state is not None
    assert unchanged.state.tzdb == "2025b"
