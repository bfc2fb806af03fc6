"""Properties every schedule must have, whatever the expression, zone, spread and cursor."""

from __future__ import annotations

import itertools
import zoneinfo
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence.clock import datetime_to_ms
from kadence.errors import InvalidScheduleError
from kadence.models import CronSchedule, DstFoldPolicy, DstGapPolicy, OnceSchedule
from kadence.timeengine.compile import compile_schedule, shortest_gap_ms, whole_minutes
from kadence.timeengine.spread import spread_offset_ms
from kadence.timeengine.zones import load_zone

from .oracle import Fields
from .test_oracle import FIELDS, ZONES

CURSORS = st.integers(
    datetime_to_ms(datetime(1990, 1, 1, tzinfo=UTC)),
    datetime_to_ms(datetime(2037, 1, 1, tzinfo=UTC)),
)
JOBS = st.from_regex(r"[a-z]{1,8}/[a-z0-9-]{1,12}", fullmatch=True)


@given(
    fields=FIELDS,
    zone=st.sampled_from(ZONES),
    gap=st.sampled_from(list(DstGapPolicy)),
    fold=st.sampled_from(list(DstFoldPolicy)),
    cursor=CURSORS,
    job=JOBS,
    spread=st.sampled_from([None, None, 0, 1, 7, 30]),
)
def test_never_early_and_strictly_forward(
    fields: Fields,
    zone: str,
    gap: DstGapPolicy,
    fold: DstFoldPolicy,
    cursor: int,
    job: str,
    spread: int | None,
) -> None:
    schedule = CronSchedule(
        expression=fields.expression, timezone=zone, dst_gap=gap, dst_fold=fold, spread_s=0
    )
    compiled = compile_schedule(schedule, job)
    if spread:  # spread only where it is shorter than the schedule's shortest interval
        occs = compiled.upcoming(cursor, 20)
        gaps = [b.nominal_ms - a.nominal_ms for a, b in itertools.pairwise(occs)]
        if not gaps or min(gaps) <= spread * 1000:
            spread = 0
    if spread != 0:
        compiled = compile_schedule(schedule.model_copy(update={"spread_s": spread}), job)
    if spread is None:  # the default: the expression's own resolution, or exact if it must be
        window = 0 if fields.second is not None else 60
        allowed = {0, spread_offset_ms(job, window)}
    else:
        allowed = {spread_offset_ms(job, spread)}
    offsets = set()
    prev_nominal = cursor
    prev_due = cursor
    for occ in compiled.upcoming(cursor, 12):
        assert occ.nominal_ms > prev_nominal  # strictly increasing: no duplicate, no going back
        assert occ.due_ms >= occ.nominal_ms  # never before its nominal instant
        assert occ.due_ms > cursor  # never before the cursor
        offsets.add(occ.due_ms - occ.nominal_ms)
        assert occ.due_ms > prev_due  # spread keeps the order
        if spread is None:  # the default spread stays inside the minute (or second) named
            unit = 1_000 if fields.second is not None else 60_000
            assert occ.due_ms // unit == occ.nominal_ms // unit
        prev_nominal, prev_due = occ.nominal_ms, occ.due_ms
    assert len(offsets) <= 1 and offsets <= allowed  # one offset per job, the one expected


def test_default_spread_is_the_minute_for_five_fields_and_exact_with_seconds() -> None:
    at = datetime_to_ms(datetime(2026, 12, 1, tzinfo=UTC))
    five = compile_schedule(CronSchedule(expression="0 0 * * *"), "acme/report")
    (occ,) = five.upcoming(at, 1)
    assert occ.due_ms - occ.nominal_ms == spread_offset_ms("acme/report", 60) > 0
    six = compile_schedule(CronSchedule(expression="0 0 0 * * *"), "acme/report")
    assert [o.due_ms - o.nominal_ms for o in six.upcoming(at, 3)] == [0, 0, 0]
    exact = compile_schedule(CronSchedule(expression="0 0 * * *", spread_s=0), "acme/report")
    assert [o.due_ms - o.nominal_ms for o in exact.upcoming(at, 3)] == [0, 0, 0]
    every_minute = compile_schedule(CronSchedule(expression="* * * * *"), "acme/report")
    offsets = {o.due_ms - o.nominal_ms for o in every_minute.upcoming(at, 5)}
    assert offsets == {spread_offset_ms("acme/report", 60)}  # fits: below the 60 s interval


def test_the_default_falls_back_to_exact_where_the_minute_does_not_fit() -> None:
    at = datetime_to_ms(datetime(2026, 12, 1, tzinfo=UTC))
    # two occurrences 30 s apart: an explicit 60 s spread is refused, the default is exact
    with pytest.raises(InvalidScheduleError):
        compile_schedule(CronSchedule(expression="0,30 * * * * *", spread_s=60), "a/b")
    compiled = compile_schedule(CronSchedule(expression="0,30 * * * * *", spread_s=None), "a/b")
    assert {o.due_ms - o.nominal_ms for o in compiled.upcoming(at, 4)} == {0}


@given(job=JOBS, spread=st.integers(1, 3600))
def test_spread_is_deterministic_forward_and_inside_its_window(job: str, spread: int) -> None:
    offset = spread_offset_ms(job, spread)
    assert 0 <= offset < spread * 1000
    assert spread_offset_ms(job, spread) == offset


def test_spread_actually_spreads() -> None:
    offsets = {spread_offset_ms(f"acme/job-{i}", 60) for i in range(1000)}
    assert len(offsets) > 900  # 1000 midnight jobs land on >900 distinct milliseconds
    seconds = {o // 1000 for o in offsets}
    assert seconds == set(range(60))  # and use the whole minute


@given(cursor=CURSORS, run_at=CURSORS)
def test_one_off_fires_once_at_its_instant(cursor: int, run_at: int) -> None:
    when = datetime.fromtimestamp(run_at / 1000, tz=UTC)
    compiled = compile_schedule(OnceSchedule(run_at=when), "acme/once")
    occ = compiled.next_after(cursor)
    if run_at > cursor:
        assert occ is not None
        assert occ.nominal_ms == occ.due_ms == datetime_to_ms(OnceSchedule(run_at=when).run_at)
        assert compiled.next_after(occ.nominal_ms) is None
    else:
        assert occ is None


@given(
    fields=FIELDS.filter(lambda f: f.second is None),
    zone=st.sampled_from(ZONES),
    gap=st.sampled_from(list(DstGapPolicy)),
    fold=st.sampled_from(list(DstFoldPolicy)),
    start=CURSORS,
)
def test_a_five_field_schedule_is_a_minute_apart_wherever_the_zone_keeps_whole_minutes(
    fields: Fields, zone: str, gap: DstGapPolicy, fold: DstFoldPolicy, start: int
) -> None:
    """Why the default spread (within the minute) is accepted without walking occurrences:
    where `whole_minutes` holds, the hundred occurrences the explicit check walks are at least
    60 s apart, whatever the expression, the DST policies and the start."""
    schedule = CronSchedule(
        expression=fields.expression, timezone=zone, dst_gap=gap, dst_fold=fold, spread_s=0
    )
    rule = compile_schedule(schedule, "t/j").rule
    assert rule is not None
    if whole_minutes(rule.zone, start):
        gap_ms = shortest_gap_ms(rule, start)
        assert gap_ms is None or gap_ms >= 60_000


@pytest.mark.slow
def test_every_zone_keeps_whole_minutes_around_now() -> None:
    """The fast path's premise, for every zone of the tz database this process loads, in the
    years jobs are created and run in."""
    odd = [
        (name, year)
        for name in sorted(zoneinfo.available_timezones())
        for year in (2026,)  # and 2027: whole_minutes looks at a year and the next
        if not whole_minutes(load_zone(name), datetime_to_ms(datetime(year, 1, 1, tzinfo=UTC)))
    ]
    assert odd == []
