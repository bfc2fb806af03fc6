"""A steady job's runs dispatched ahead in one pass (series.py) give exactly what the run-by-run
loop gives: the same state, records and counts, for any job, caps and wake times."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import Decision
from streams.scheduler import definitions, firing, series
from streams.scheduler.entries import Entry, _derived
from streams.scheduler.state import RUNNING_LIMIT, JobState
from streams.scheduler.step import Effects, Facts
from streams.scheduler.tenant_limits import TenantCaps, TenantLoad
from tests.scheduler.test_domain import CODEC, T0, ctx, definition, executions, history

SPRING = datetime_to_ms(datetime(2026, 3, 29, 0, 59, 0, tzinfo=UTC))
"""A minute before Europe/Berlin's clocks spring forward (02:00 local does not exist)."""

SCHEDULES = st.sampled_from(
    [
        {"kind": "cron", "expression": "* * * * * *"},
        {"kind": "cron", "expression": "*/7 * * * * *", "spread_s": 2},
        {"kind": "cron", "expression": "* * * * *"},
        {"kind": "cron", "expression": "* 2 * * *", "timezone": "Europe/Berlin"},
        {
            "kind": "cron",
            "expression": "*/20 * * * * *",
            "timezone": "Europe/Berlin",
            "dst_gap": "skip",
        },
        {"kind": "cron", "expression": "30 1,2,3 * * *", "timezone": "Europe/Berlin"},
        {"kind": "interval", "every_s": 1},
        {"kind": "interval", "every_s": 3, "offset_s": 1, "spread_s": 1},
        {"kind": "cron", "expression": "* * * * * *", "end_at": "2026-12-01T09:00:40Z"},
        {"kind": "cron", "expression": "* * * * * *", "end_at": "2026-03-29T01:00:10Z"},
    ]
)


@contextmanager
def run_by_run() -> Iterator[None]:
    """`_dispatch_ahead` without its one-pass series: every run through the general loop."""
    with mock.patch.object(firing, "fire_series", lambda state, *_: state):
        yield


def both(state: JobState, facts: Facts) -> tuple[Effects, Effects]:
    fast = firing.on_due(state, facts)
    with run_by_run():
        slow = firing.on_due(state, facts)
    return fast, slow


def assert_same(fast: Effects, slow: Effects) -> None:
    assert fast.out == slow.out
    assert fast.state == slow.state
    assert fast.scheduled == slow.scheduled
    assert (fast.started, fast.urgent, fast.probe) == (slow.started, slow.urgent, slow.probe)


def created(at: int, ahead_ms: int, **kw: Any) -> JobState:
    d = definition(**kw)
    facts = ctx(at, ahead_ms=ahead_ms)
    result = definitions.apply_definition(None, d, CODEC.encode(d), at, facts)
    assert result.state is not None
    return result.state


@settings(max_examples=300, deadline=None)
@given(
    schedule=SCHEDULES,
    overlap=st.sampled_from(["allow", "allow", "allow", "skip", "buffer_one"]),
    max_runs=st.sampled_from([None, None, None, 1, 7, 40]),
    group=st.sampled_from([None, None, None, None, "g"]),
    age=st.none() | st.integers(1_000, 120_000),
    timeout_ms=st.integers(1_000, 30_000),
    caps=st.sampled_from([None, None, None, (0, 0), (0, 5), (3, 0), (10, 20)]),
    spring=st.booleans(),
    ahead_ms=st.sampled_from([0, 5_000, 30_000, 30_000, 90_000]),
    steps=st.lists(
        st.tuples(
            st.none() | st.none() | st.integers(0, 1_500) | st.integers(0, 45_000),
            st.sampled_from([0, 0, 3, 5, 40]),  # the tenant's runs in progress
        ),
        min_size=1,
        max_size=10,
    ),
)
def test_the_series_gives_what_the_run_by_run_loop_gives(
    schedule: dict[str, Any],
    overlap: str,
    max_runs: int | None,
    group: str | None,
    age: int | None,
    timeout_ms: int,
    caps: tuple[int, int] | None,
    spring: bool,
    ahead_ms: int,
    steps: list[tuple[int | None, int]],
) -> None:
    start = SPRING if spring else T0
    if "end_at" in schedule and (
        datetime_to_ms(datetime.fromisoformat(schedule["end_at"])) < start
    ):
        schedule = {k: v for k, v in schedule.items() if k != "end_at"}
    state = created(
        start,
        ahead_ms,
        schedule=schedule,
        overlap=overlap,
        max_runs=max_runs,
        concurrency_key=group,
        max_event_age_ms=age,
        timeout_ms=timeout_ms,
        lease_ttl_ms=3_000,
    )
    now = start
    for step, in_progress in steps:  # None: at the job's wake time, as the runtime wakes it
        wake = state.wake_ms
        now = max(now, wake) if step is None and wake is not None else now + (step or 0)
        load = TenantLoad(TenantCaps(*caps or (0, 0)), running=in_progress, now_ms=now)
        fast, slow = both(state, ctx(now, ahead_ms=ahead_ms, tenant=load))
        assert_same(fast, slow)
        if fast.state is None:
            break
        state = fast.state
        entries: tuple[Entry, ...] = (*state.running, *state.ahead)
        for entry in entries:  # marked when made: as a look would find
            assert entry.derived is None or entry.derived is _derived(replace(entry, derived=None))


def test_a_steady_job_fires_its_series_in_one_pass_and_checks_each_run() -> None:
    """The one-pass series runs for a per-second job under its tenant's caps (B2's jobs) and
    gives its first 30 runs at once, with the look-ahead entries and runs the loop remembers."""
    calls: list[int] = []
    real = series.fire_series

    def counted(state: JobState, effects: Effects, *rest: Any) -> JobState:
        after = real(state, effects, *rest)
        calls.append(len(effects.out))
        return after

    state = created(T0, 30_000, schedule={"kind": "cron", "expression": "* * * * * *"})
    load = TenantLoad(TenantCaps(2_000, 4_167), now_ms=T0)  # the default caps' share
    with mock.patch.object(firing, "fire_series", counted):
        result = firing.on_due(state, ctx(T0, ahead_ms=30_000, tenant=load))
    runs = executions(result)
    assert calls == [30]  # all 30 of the first look-ahead, in the one pass
    assert [r.nominal_at for r in runs] == [ms_to_datetime(T0 + i * 1000) for i in range(1, 31)]
    assert result.state is not None
    assert len(result.state.running) == len(result.state.ahead) == 30
    fast, slow = both(state, ctx(T0, ahead_ms=30_000, tenant=load))
    assert_same(fast, slow)


def test_the_series_stops_at_the_jobs_run_limit_where_the_loop_decides() -> None:
    """Near RUNNING_LIMIT the pass hands over: the general loop counts the runs that still count
    and stops there, as it always did."""
    state = created(T0, 10_000, schedule={"kind": "cron", "expression": "* * * * * *"})
    first = firing.on_due(state, ctx(T0, ahead_ms=10_000))
    assert first.state is not None
    assert len(first.state.running) == 10
    wide = 2 * RUNNING_LIMIT * 1000  # a look-ahead that would take 2 000 runs
    fast, slow = both(first.state, ctx(T0 + 1, ahead_ms=wide))
    assert_same(fast, slow)
    assert len(executions(fast)) == RUNNING_LIMIT - 10


def test_a_dst_gap_inside_the_look_ahead_hands_over_to_the_loop() -> None:
    """Runs on both sides of a skipped DST gap go out in one wake: the pass stops before the
    run after the gap, and the loop records the skip between the two series."""
    schedule = {
        "kind": "cron",
        "expression": "*/20 * * * * *",
        "timezone": "Europe/Berlin",
        "dst_gap": "skip",
    }
    state = created(SPRING, 90_000, schedule=schedule)
    fast, slow = both(state, ctx(SPRING, ahead_ms=90_000))
    assert_same(fast, slow)
    nominal = [r.nominal_at.strftime("%H:%M:%S") for r in executions(fast)]
    assert nominal == ["00:59:20", "00:59:40", "01:00:00", "01:00:20"]
    skips = [h for h in history(fast) if h.decision is Decision.skipped_dst]
    assert skips  # the gap, in history between the runs before it and after it
    decided = [h.decision for h in history(fast)]
    assert decided.index(Decision.skipped_dst) == 1  # after the first series' `fired` record
    assert decided[-1] is Decision.fired
    now = SPRING  # a shorter look-ahead: the wake whose first run comes after the gap
    for _ in range(4):
        assert state.wake_ms is not None
        now = max(now, state.wake_ms)
        fast, slow = both(state, Facts(now, CODEC, "2026a", ahead_ms=30_000))
        assert_same(fast, slow)
        assert fast.state is not None
        state = fast.state
    assert state.tzdb == "2026a"


def test_a_run_due_within_a_second_makes_the_wake_urgent() -> None:
    state = created(T0, 30_000, schedule={"kind": "cron", "expression": "* * * * * *"})
    fast, slow = both(state, ctx(T0 + 500, ahead_ms=30_000))
    assert_same(fast, slow)
    assert fast.urgent
    later, _ = both(state, ctx(T0 - 1, ahead_ms=30_000))
    assert not later.urgent


def test_caps_without_room_at_a_wake_leave_the_job_as_it_was() -> None:
    """The tenant's other jobs took its room between two wakes: the pass fires nothing, and
    changes nothing (the runs that expired meanwhile are dropped only by a run that fires)."""
    every_s = {"kind": "cron", "expression": "* * * * * *"}
    state = created(T0, 30_000, schedule=every_s, timeout_ms=1_000, lease_ttl_ms=3_000)
    caps = TenantCaps(0, 40)
    first = firing.on_due(state, ctx(T0, ahead_ms=30_000, tenant=TenantLoad(caps, now_ms=T0)))
    assert first.state is not None
    assert first.state.wake_ms is not None
    wake = first.state.wake_ms + 5_000  # runs due in its first seconds have expired by then
    full = TenantLoad(caps, running=40, now_ms=wake)
    fast, slow = both(first.state, ctx(wake, ahead_ms=30_000, tenant=full))
    assert_same(fast, slow)
    assert executions(fast) == []
    assert fast.state is not None
    assert fast.state.running == first.state.running
    assert any(r.expires_ms <= wake for r in fast.state.running)
