"""Look-ahead dispatch on a fake clock: out before due, due time intact, revocable until then."""

from __future__ import annotations

import base64
import json
from collections import Counter
from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kadence.clock import ms_to_datetime
from kadence.fired_series import runs_of
from kadence.models import (
    CancelRun,
    Decision,
    ExecutionRevoked,
    OutcomeStatus,
    PauseJob,
    ResumeJob,
)
from streams.scheduler import commands, definitions, firing, outcomes
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.step import Effects
from tests.scheduler.test_domain import (
    CODEC,
    MIN,
    T0,
    create,
    ctx,
    decisions,
    definition,
    executions,
    history,
    outcome,
)

AHEAD = 30_000


def revoked(result: Effects) -> list[ExecutionRevoked]:
    return [e.record for e in result.out if isinstance(e.record, ExecutionRevoked)]


def due(state: JobState, now: int, **kw: Any) -> Effects:
    return firing.on_due(state, ctx(now, ahead_ms=AHEAD, **kw))


def command(state: JobState, cmd: Any, now: int) -> Effects:
    return commands.apply_command(state, cmd, ctx(now, ahead_ms=AHEAD))


def created(at: int = T0, **kw: Any) -> JobState:
    """A job created with look-ahead on (the create step settles its wake time)."""
    d = definition(**kw)
    result = definitions.apply_definition(None, d, CODEC.encode(d), at, ctx(at, ahead_ms=AHEAD))
    assert result.state is not None
    return result.state


def common(**kw: Any) -> dict[str, Any]:
    return {"tenant": "acme", "job_id": "job", "issued_at": ms_to_datetime(T0), **kw}


def test_an_idle_job_wakes_ahead_and_its_execution_keeps_the_due_time() -> None:
    state = created()
    assert state.early_ms == AHEAD
    assert state.wake_ms == T0 + MIN - AHEAD
    assert executions(due(state, T0 + MIN - AHEAD - 1)) == []  # not before the look-ahead
    result = due(state, T0 + MIN - AHEAD)
    [ex] = executions(result)
    assert ex.due_at == ex.nominal_at == ms_to_datetime(T0 + MIN)
    assert ex.dispatched_at == ms_to_datetime(T0 + MIN - AHEAD)
    [fired] = history(result)
    assert fired.decision is Decision.fired
    assert fired.details == {"trigger": "schedule", "lateness_ms": "0", "ahead_ms": str(AHEAD)}
    assert result.state is not None
    assert result.state.cursor_ms == T0 + MIN
    assert result.state.wake_ms == T0 + 2 * MIN - AHEAD
    assert [a.execution_id for a in result.state.ahead] == [ex.execution_id]


def test_only_a_run_due_now_asks_for_an_immediate_commit() -> None:
    """A run sent ahead may wait for the runtime's commit interval; one due now must not."""
    assert not due(created(), T0 + MIN - AHEAD).urgent
    assert due(create(), T0 + MIN - AHEAD).urgent is False  # nothing fired
    assert firing.on_due(create(), ctx(T0 + MIN)).urgent


def test_look_ahead_off_fires_at_the_due_time_as_before() -> None:
    state = create()
    assert state.early_ms == 0
    assert state.wake_ms == T0 + MIN
    assert executions(firing.on_due(state, ctx(T0 + MIN - 1))) == []


def test_a_per_second_allow_job_has_the_whole_window_out_and_nothing_beyond() -> None:
    state = created(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"})
    now = T0 + 10_000
    result = due(state, now)
    dues = [int(e.due_at.timestamp() * 1000) for e in executions(result)]
    assert dues == list(range(T0 + 1_000, now + AHEAD + 1, 1_000))  # catch-up, then ahead
    assert all(e.dispatched_at == ms_to_datetime(now) for e in executions(result))
    assert result.state is not None
    # it refills the window once a quarter of it is left (the last run 7.5 s from due): 22
    # runs per wake, not one per second
    assert result.state.wake_ms == now + 22_500
    later = due(result.state, now + 22_500)
    dues = [int(e.due_at.timestamp() * 1000) for e in executions(later)]
    assert dues == list(range(now + AHEAD + 1_000, now + 52_001, 1_000))
    assert len(dues) == 22
    assert later.state is not None
    assert later.state.wake_ms == now + 44_500
    assert [a.due_ms for a in later.state.ahead] == list(range(now + 23_000, now + 52_001, 1_000))


def test_a_job_further_apart_than_three_quarters_of_the_window_goes_out_a_whole_window_ahead() -> (
    None
):
    state = created(schedule={"kind": "cron", "spread_s": 0, "expression": "*/30 * * * * *"})
    first = due(state, T0 + 30_000 - AHEAD)  # due at +30 s: woken 30 s before
    assert [e.due_at for e in executions(first)] == [ms_to_datetime(T0 + 30_000)]
    assert first.state is not None
    assert first.state.wake_ms == T0 + 60_000 - AHEAD  # the next, due at +60 s, 30 s before


def test_a_job_closer_together_refills_when_a_quarter_of_the_window_is_left() -> None:
    state = created(schedule={"kind": "cron", "spread_s": 0, "expression": "*/20 * * * * *"})
    first = due(state, T0 + 20_000 - AHEAD)  # due at +20 s: woken 30 s before
    assert [e.due_at for e in executions(first)] == [ms_to_datetime(T0 + 20_000)]
    assert first.state is not None
    # the next, due at +40 s, once the one out (+20 s) is 7.5 s from due: 27.5 s before its own
    assert first.state.wake_ms == T0 + 12_500


def test_jobs_whose_decision_depends_on_other_runs_wait_for_the_due_time() -> None:
    grouped = created(concurrency_key="reports")
    assert grouped.early_ms == 0
    assert grouped.wake_ms == T0 + MIN
    paused = created(paused=True)
    assert (paused.early_ms, paused.wake_ms) == (0, T0 + MIN)  # wakes at due, only to skip it
    skip = created(overlap="skip")
    first = due(skip, T0 + MIN - AHEAD)
    [ex] = executions(first)
    assert first.state is not None
    # the first is "running" now, so the next one waits for its due time and the overlap check
    assert first.state.early_ms == 0
    assert first.state.wake_ms == T0 + 2 * MIN
    finished = outcomes.apply_outcome(
        first.state, outcome(ex, OutcomeStatus.succeeded), ctx(T0 + MIN + 5_000, ahead_ms=AHEAD)
    )
    assert finished.state is not None
    assert finished.state.wake_ms == T0 + 2 * MIN - AHEAD  # idle again: may go early


def test_a_skip_job_still_running_at_the_due_time_skips_as_before() -> None:
    skip = created(overlap="skip")
    first = due(skip, T0 + MIN - AHEAD)
    assert first.state is not None
    second = due(first.state, T0 + 2 * MIN)
    assert executions(second) == []
    assert decisions(second) == [Decision.skipped_overlap]


def test_pause_before_due_revokes_and_the_occurrence_is_skipped_not_caught_up() -> None:
    state = due(created(), T0 + MIN - AHEAD).state
    assert state is not None
    result = command(state, PauseJob(request_id="p", **common()), T0 + MIN - 10_000)
    [rev] = revoked(result)
    assert rev.execution_id == "acme/job@2026-12-01T09:01:00.000Z"
    assert (rev.definition_version, rev.due_at) == (1, ms_to_datetime(T0 + MIN))
    assert decisions(result) == [Decision.cancelled, Decision.paused]
    assert history(result)[0].details == {"revoked": "true", "actor": "kafka"}  # no API actor
    paused = result.state
    assert paused is not None
    assert paused.ahead == ()
    assert paused.cursor_ms == T0  # rewound: the occurrence was not dispatched after all
    assert paused.wake_ms == T0 + MIN  # at its due time, not before
    skipped = due(paused, T0 + MIN)
    assert executions(skipped) == []
    [skip] = history(skipped)
    assert (skip.decision, skip.execution_id) == (Decision.skipped_paused, rev.execution_id)
    assert skipped.state is not None
    resumed = command(skipped.state, ResumeJob(request_id="r", **common()), T0 + MIN + 5_000)
    assert executions(resumed) == []  # skipped while paused: a resume does not run it
    assert decisions(resumed) == [Decision.resumed]


def test_pause_after_the_due_time_revokes_nothing() -> None:
    state = due(created(), T0 + MIN - AHEAD).state
    assert state is not None
    result = command(state, PauseJob(request_id="p", **common()), T0 + MIN)
    assert revoked(result) == []
    assert result.state is not None
    assert result.state.cursor_ms == T0 + MIN


def test_a_change_before_due_revokes_and_the_new_version_decides() -> None:
    state = due(created(), T0 + MIN - AHEAD).state
    assert state is not None
    now = T0 + MIN - 20_000
    v2 = definition(version=2, payload=b"new")
    changed = definitions.apply_definition(
        state, v2, CODEC.encode(v2), now, ctx(now, ahead_ms=AHEAD)
    )
    [rev] = revoked(changed)
    assert rev.definition_version == 1
    assert changed.state is not None
    assert changed.state.wake_ms is not None
    assert changed.state.wake_ms <= now  # re-dispatch right away, under version 2
    [ex] = executions(due(changed.state, now))
    assert (ex.execution_id, ex.definition_version, ex.payload) == (rev.execution_id, 2, b"new")
    v3 = definition(version=3, schedule={"kind": "cron", "spread_s": 0, "expression": "30 9 * * *"})
    moved = definitions.apply_definition(state, v3, CODEC.encode(v3), now, ctx(now, ahead_ms=AHEAD))
    assert [r.execution_id for r in revoked(moved)] == [rev.execution_id]
    assert moved.state is not None
    assert moved.state.next_nominal_ms == T0 + 30 * MIN  # 09:01 is no longer an occurrence


def test_delete_before_due_revokes() -> None:
    state = due(created(), T0 + MIN - AHEAD).state
    assert state is not None
    result = definitions.apply_delete(state, ctx(T0 + MIN - 1, ahead_ms=AHEAD))
    assert [r.reason for r in revoked(result)] == ["job deleted before it was due"]
    assert decisions(result) == [Decision.cancelled, Decision.deleted]
    assert result.state is None


def test_cancel_revokes_just_that_run() -> None:
    state = created(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"})
    out = due(state, T0)
    assert out.state is not None
    target, kept = executions(out)[0], executions(out)[1:]
    cancel = CancelRun(request_id="c", execution_id=target.execution_id, **common())
    result = command(out.state, cancel, T0 + 100)
    assert [r.execution_id for r in revoked(result)] == [target.execution_id]
    assert result.state is not None
    assert [a.execution_id for a in result.state.ahead] == [k.execution_id for k in kept]
    assert result.state.cursor_ms == out.state.cursor_ms  # no rewind: cancelled, not redone


def test_look_ahead_entries_are_kept_until_due_and_survive_a_restart() -> None:
    state = due(created(), T0 + MIN - AHEAD).state
    assert state is not None
    assert load_state(dump_state(state), state.definition_bytes) == state
    settled = due(state, T0 + MIN)  # due now: no longer revocable
    assert settled.state is not None
    assert settled.state.ahead == ()


def _as_v1(state: JobState) -> dict[str, object]:
    """The JSON body a v1 build wrote for the same state (definition in base64)."""
    body: dict[str, object] = json.loads(dump_state(state)[3:])
    body.update(undispatched=list(state.undispatched), backfilled=list(state.backfilled))
    body["v"] = 1
    body["definition"] = base64.b64encode(state.definition_bytes).decode()
    return body


def test_states_written_before_look_ahead_existed_still_load() -> None:
    body = _as_v1(create())
    del body["ahead"], body["early_ms"]
    old = load_state(json.dumps(body).encode())
    assert (old.ahead, old.early_ms) == ((), 0)


@given(
    steps=st.lists(st.integers(min_value=1, max_value=20_000), min_size=1, max_size=60),
    pauses=st.sets(st.integers(min_value=0, max_value=59), max_size=6),
    every_second=st.booleans(),
)
def test_never_more_than_the_look_ahead_early_and_never_twice(
    steps: list[int], pauses: set[int], every_second: bool
) -> None:
    """Whatever the timing of wakes and pause/resume: nothing goes out more than the
    look-ahead before it is due, each occurrence is out at most once net of revocations, and
    every occurrence due while the job was never paused goes out."""
    expr = "* * * * * *" if every_second else "* * * * *"
    state = created(
        schedule={"kind": "cron", "spread_s": 0, "expression": expr}, missed={"mode": "none"}
    )
    now, net, paused = T0, Counter[str](), False
    for i, step in enumerate(steps):
        now += step
        if i in pauses:
            cmd: Any = (ResumeJob if paused else PauseJob)(request_id=f"r{i}", **common())
            result = command(state, cmd, now)
            paused = not paused
        elif state.wake_ms is not None and state.wake_ms <= now:
            result = due(state, now)
        else:
            continue
        for ex in executions(result):
            assert ex.due_at - ex.dispatched_at <= timedelta(milliseconds=AHEAD)
            net[ex.execution_id] += 1
        for rev in revoked(result):
            assert rev.due_at > ms_to_datetime(now)  # only what is not due yet
            net[rev.execution_id] -= 1
        assert result.state is not None
        state = result.state
    assert all(n in (0, 1) for n in net.values()), net
    if not pauses:
        period = 1_000 if every_second else MIN
        expected = {
            f"acme/job@{ms_to_datetime(t).isoformat(timespec='milliseconds')[:-6]}Z"
            for t in range(T0 + period, now + 1, period)
        }
        dispatched = {eid for eid, n in net.items() if n == 1}
        assert expected <= dispatched


def test_a_window_of_runs_out_ahead_is_one_fired_record_that_stands_for_each_run() -> None:
    """A per-second job's refill writes one `fired` record for its 22 runs, not 22; read back
    (kadence/fired_series.py, as the view does) it is each run's own record, as before."""
    state = created(schedule={"kind": "cron", "spread_s": 0, "expression": "* * * * * *"})
    first = due(state, T0 + 10_000)  # 10 s late: the due ones one by one, then the window
    assert first.state is not None
    now = first.state.wake_ms
    assert now == T0 + 10_000 + 22_500
    refill = due(first.state, now)
    sent = executions(refill)
    [record] = history(refill)
    assert len(sent) == 22
    assert record.details["runs"] == "22"
    assert record.details["step_ms"] == "1000"
    runs = runs_of(record)
    assert [r.execution_id for r in runs] == [e.execution_id for e in sent]
    assert [(r.nominal_at, r.due_at) for r in runs] == [(e.nominal_at, e.due_at) for e in sent]
    ahead = [str(int(e.due_at.timestamp() * 1000) - now) for e in sent]
    assert [r.details for r in runs] == [
        {"trigger": "schedule", "lateness_ms": "0", "ahead_ms": a} for a in ahead
    ]
    # the catch-up's late runs are one record each; the runs ahead after them one in all
    late = [h for h in history(first) if "ahead_ms" not in h.details]
    [window] = [h for h in history(first) if "ahead_ms" in h.details]
    assert len(late) + int(window.details["runs"]) == len(executions(first))
