"""Backfill on a fake clock: one plan function decides for the scheduler and for the API's dry
run (on the facts the scheduler publishes), a missed window is run, occurrences already
dispatched do not use up max_occurrences and what is left out is said, and a long backfill is
paced across steps (issue 17, items 1-3)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import Backfill, Decision, HistoryRecord
from kadence.timeengine.engine import CompiledSchedule
from streams.scheduler import backfill, commands, firing
from streams.scheduler.backfill import STEP_RUNS, STEP_SCAN, DispatchFacts, plan
from streams.scheduler.state import JobState, dump_state, load_state
from streams.scheduler.step import Effects, Refused
from tests.scheduler.test_domain import (
    MIN,
    T0,
    create,
    ctx,
    decisions,
    definition,
    executions,
    history,
)


def command(request_id: str, start: int, end: int, **kw: Any) -> Backfill:
    return Backfill(
        tenant="acme",
        job_id="job",
        request_id=request_id,
        issued_at=ms_to_datetime(T0),
        start=ms_to_datetime(start),
        end=ms_to_datetime(end),
        **kw,
    )


def fired(result: Effects) -> list[int]:
    return [datetime_to_ms(e.nominal_at) for e in executions(result) if e.trigger == "backfill"]


def progress(result: Effects) -> list[HistoryRecord]:
    return [h for h in history(result) if h.decision is Decision.backfill_progress]


def run_to_end(state: JobState, first: Effects, now: int, **kw: Any) -> tuple[JobState, list[int]]:
    """Step the backfill the command started until it is done, one wake at a time."""
    got = fired(first)
    assert first.state is not None
    state = first.state
    for _ in range(10_000):
        if not state.backfills:
            return state, got
        wake = state.wake_ms
        assert wake is not None
        now = max(now, wake)
        result = firing.on_due(state, ctx(now, **kw))
        got += fired(result)
        assert result.state is not None
        state = result.state.evolve(running=())  # their outcomes came: room for the next step
    raise AssertionError("the backfill never ended")


def down_for_a_day() -> JobState:
    """A per-minute job that was down for a day: the catch-up walked the first 1000 missed
    occurrences one by one and jumped over the rest (one history record for the range)."""
    state = create(definition(missed={"mode": "none"}), at=T0 - 2 * 1440 * MIN)
    result = firing.on_due(state, ctx(T0))
    assert result.state is not None
    assert "not listed one by one" in " ".join(h.reason for h in history(result))
    return result.state


def test_a_wholly_missed_window_is_backfilled_also_where_the_catch_up_jumped() -> None:
    state = down_for_a_day()
    start, end = T0 - 1440 * MIN, T0 - 1380 * MIN  # an hour the catch-up jumped over
    first = commands.apply_command(state, command("b1", start, end), ctx(T0))
    _, got = run_to_end(state, first, T0)
    assert got == list(range(start, end, MIN))  # every one: none of them ever ran


def test_the_api_plan_on_the_published_facts_is_what_the_scheduler_fires() -> None:
    state = down_for_a_day()
    later = firing.on_due(state, ctx(T0 + 3 * MIN + 10)).state  # 3 more run on time
    assert later is not None
    start, end = T0 - 1500 * MIN, T0 + 2 * MIN
    dry = commands.apply_command(later, command("p1", start, end, dry_run=True), ctx(T0 + 4 * MIN))
    assert executions(dry) == []  # a dry run fires nothing
    [planned] = [h for h in history(dry) if h.decision is Decision.backfill_planned]
    facts = DispatchFacts.from_details(planned.details)
    api = plan(later.compiled(ctx(0).codec), facts, start, end, force=False, limit=100_000)
    real = commands.apply_command(
        later, command("r1", start, end, max_occurrences=100_000), ctx(T0 + 4 * MIN)
    )
    _, got = run_to_end(later, real, T0 + 4 * MIN)
    assert [o.nominal_ms for o in api.runs] == got
    assert set(api.dispatched) == {T0}  # on time; T0 + 1 min was missed (late, mode none)
    assert len(got) == 1501  # the missed day's last 1500 minutes before T0, and T0 + 1 min


def test_already_dispatched_ones_do_not_use_up_max_occurrences_and_the_rest_is_said() -> None:
    state = create(definition(), at=T0 - 10 * MIN)
    for k in range(1, 6):  # five on time: 08:51 .. 08:55
        result = firing.on_due(state, ctx(T0 - (10 - k) * MIN + 100))
        assert result.state is not None
        state = result.state
    cmd = command("b1", T0 - 20 * MIN, T0 - 4 * MIN, max_occurrences=7)
    result = commands.apply_command(state, cmd, ctx(T0 - 4 * MIN))
    # 08:40..08:50 were never dispatched (the job was created at 08:50): 7 of them run, 4 are
    # left out; 08:51..08:55 ran on time and do not count against the 7 (on main they did)
    assert fired(result) == list(range(T0 - 20 * MIN, T0 - 13 * MIN, MIN))
    assert decisions(result).count(Decision.skipped_dispatched) == 5
    [done] = progress(result)
    assert done.details["done"] == "true"
    assert done.details["already_dispatched"] == "5"
    assert done.details["left_out"] == "4"
    assert done.details["resume_at"] == ms_to_datetime(T0 - 13 * MIN).isoformat()
    assert "4 left out past max_occurrences" in done.reason
    api = plan(
        state.compiled(ctx(0).codec),
        DispatchFacts.of(state),
        T0 - 20 * MIN,
        T0 - 4 * MIN,
        force=False,
        limit=7,
    )
    assert [o.nominal_ms for o in api.runs] == fired(result)
    assert api.left_out == 4
    assert len(api.dispatched) == 5


def test_a_long_backfill_is_paced_per_step_and_per_tenant_second() -> None:
    state = create(definition(), at=T0)
    start, end = T0 - 1000 * MIN, T0
    first = commands.apply_command(
        state, command("big", start, end, max_occurrences=1000), ctx(T0, backfill_budget=300)
    )
    assert len(fired(first)) == STEP_RUNS  # one transaction: one step, not the whole window
    assert progress(first)[0].details == {
        "request_id": "big",
        "fired": str(STEP_RUNS),
        "already_dispatched": "0",
        "done": "false",
        "actor": "kafka",  # a command written to Kafka directly: no API actor
    }
    assert first.state is not None
    second = firing.on_due(first.state, ctx(T0 + 1, backfill_budget=300 - STEP_RUNS))
    assert len(fired(second)) == 100  # what the tenant has left in this second
    assert second.state is not None
    stalled = firing.on_due(second.state, ctx(T0 + 2, backfill_budget=0))
    assert fired(stalled) == []  # the second's budget is spent: wait for the next second
    assert stalled.state is not None
    assert stalled.state.wake_ms == T0 + 2 + 1_000
    _, rest = run_to_end(stalled.state, Effects(stalled.state), T0 + 1_002)
    got = fired(first) + fired(second) + rest
    assert got == list(range(start, end, MIN))  # all, once, in order
    state_after = stalled.state
    assert state_after.backfills[0].fired == STEP_RUNS + 100


def test_a_step_looks_no_further_than_its_runs_unless_it_may_spend_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each step of a backfill runs on the scheduler's one loop, between every tenant's due
    runs. The first step of a forced backfill of 10 000 walked on past its 200 runs to its scan
    bound only to count what it left for the next steps: 1 800 more searches, 0.4 s of the loop
    (seconds on a loaded machine), while another tenant's job due in 4 s waited."""
    searches: list[int] = []
    next_after = CompiledSchedule.next_after

    def counted(self: CompiledSchedule, cursor_ms: int) -> Any:
        searches.append(cursor_ms)
        return next_after(self, cursor_ms)

    state = create(definition(), at=T0)
    monkeypatch.setattr(CompiledSchedule, "next_after", counted)
    big = command("big", T0 - 3000 * MIN, T0, max_occurrences=10_000, force=True)
    first = commands.apply_command(state, big, ctx(T0))
    assert len(fired(first)) == STEP_RUNS
    assert len(searches) == STEP_RUNS + 1  # its runs, and the first one it leaves
    searches.clear()  # the last step may spend max_occurrences: it counts what it leaves
    last = commands.apply_command(
        state, command("last", T0 - 3000 * MIN, T0, max_occurrences=7, force=True), ctx(T0)
    )
    assert len(fired(last)) == 7
    assert len(searches) > STEP_SCAN
    [done] = progress(last)
    assert done.details["left_out"] == str(STEP_SCAN)  # as far as a step looks


def test_a_backfill_in_progress_survives_a_restore() -> None:
    state = create(definition(), at=T0)
    first = commands.apply_command(
        state, command("big", T0 - 500 * MIN, T0, max_occurrences=500), ctx(T0)
    )
    assert first.state is not None
    restored = load_state(dump_state(first.state), first.state.definition_bytes)
    assert restored.backfills == first.state.backfills
    assert restored.wake_ms == first.state.wake_ms
    _, rest = run_to_end(restored, Effects(restored), T0)
    assert fired(first) + rest == list(range(T0 - 500 * MIN, T0, MIN))


def test_backfills_of_one_job_queue_up_to_a_limit() -> None:
    state: JobState | None = create(definition(), at=T0)
    for n in range(backfill.QUEUED_LIMIT):
        assert state is not None
        result = commands.apply_command(
            state,
            command(f"b{n}", T0 - 1000 * MIN, T0, max_occurrences=1000),
            ctx(T0, backfill_budget=0),
        )
        state = result.state
    assert state is not None
    with pytest.raises(Refused, match="backfills of this job are in progress"):
        commands.apply_command(state, command("one-too-many", T0 - MIN, T0), ctx(T0))


@settings(max_examples=60, deadline=None)
@given(
    cursor=st.integers(0, 300),
    created=st.integers(-10, 300),
    undispatched=st.sets(st.integers(0, 300), max_size=40),
    backfilled=st.sets(st.integers(0, 300), max_size=40),
    window=st.tuples(st.integers(-20, 320), st.integers(1, 200)),
    limit=st.integers(1, 400),
)
def test_published_facts_decide_like_the_schedulers_own(
    cursor: int,
    created: int,
    undispatched: set[int],
    backfilled: set[int],
    window: tuple[int, int],
    limit: int,
) -> None:
    """What the dry run publishes (facts cut to the window, through history details) plans the
    same as the scheduler's whole memory."""
    base = create(definition(), at=T0)
    compiled = base.compiled(ctx(0).codec)

    def at(n: int) -> int:
        return T0 + n * MIN

    facts = DispatchFacts(
        at(cursor),
        min(at(created), at(cursor)),
        frozenset(map(at, undispatched)),
        frozenset(map(at, backfilled)),
        ((at(5), at(9)),),
    )
    start, end = at(window[0]), at(window[0] + window[1])
    published = DispatchFacts.from_details(facts.within(start, end).details())
    mine = plan(compiled, facts, start, end, force=False, limit=limit)
    theirs = plan(compiled, published, start, end, force=False, limit=limit)
    assert mine == theirs
    assert all(not facts.dispatched(o.nominal_ms) for o in mine.runs)
