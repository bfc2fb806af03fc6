"""Exclusions (issue 31): a schedule with exclusions runs exactly the occurrences of the same
schedule without them whose local time no exclusion names — checked against the brute-force
oracle's own matcher, across DST transitions in every oracle zone — and the search skips
excluded stretches without ever passing a run that should happen."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kadence.clock import datetime_to_ms
from kadence.errors import InvalidScheduleError
from kadence.models import CronSchedule, DstFoldPolicy, ExcludeCron, ExcludeDates, IntervalSchedule
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import CompiledSchedule

from .oracle import Fields
from .test_oracle import DOM, DOW, HOUR, MINUTE, MONTH, _engine_run, _on_some_real_date, window

Check = tuple[date, date] | Fields
"""How the oracle checks one exclusion: a (first, last) date range, or cron fields."""
EXCLUDE_FIELDS = st.builds(Fields, minute=MINUTE, hour=HOUR, dom=DOM, month=MONTH, dow=DOW)
BASES = st.sampled_from(
    [
        {"kind": "cron", "expression": "*/15 * * * *", "spread_s": 0},
        {"kind": "cron", "expression": "30 1,2 * * *", "spread_s": 0},
        {"kind": "cron", "expression": "0 * * * *", "spread_s": 0},
        {"kind": "interval", "every_s": 1800, "offset_s": 600},
        {"kind": "interval", "every_s": 5400},
    ]
)


@st.composite
def exclusions(draw: st.DrawFn, around: date) -> tuple[list[object], list[Check]]:
    """Model entries, and what the oracle checks each with: a (first, last) date range or
    the oracle's Fields."""
    entries: list[object] = []
    checks: list[Check] = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            first = around + timedelta(days=draw(st.integers(-2, 2)))
            last = first + timedelta(days=draw(st.integers(0, 2)))
            entries.append(ExcludeDates(start=first.isoformat(), end=last.isoformat()))
            checks.append((first, last))
        else:
            fields = draw(EXCLUDE_FIELDS)
            entries.append(ExcludeCron(expression=fields.expression))
            checks.append(fields)
    return entries, checks


def excluded(checks: list[Check], wall: datetime) -> bool:
    minute = wall.replace(second=0)
    for check in checks:
        if isinstance(check, Fields):
            if check.matches(minute):
                return True
        elif check[0] <= wall.date() <= check[1]:
            return True
    return False


def compiled_unless_nothing_left(
    schedule: CronSchedule | IntervalSchedule,
) -> CompiledSchedule | None:
    try:
        return compile_schedule(schedule, "t/ex")
    except InvalidScheduleError as refused:
        if refused.errors != ["schedule.exclude: the exclusions leave no occurrence to run"]:
            raise
        return None


@settings(deadline=None, max_examples=300)
@given(BASES, window(around_s=40 * 3600), st.data())
def test_exactly_the_occurrences_no_exclusion_names_run(
    base: dict[str, object], w: tuple[zoneinfo.ZoneInfo, int, int], data: st.DataObject
) -> None:
    zone, start, end = w
    around = datetime.fromtimestamp(start, zone).date()
    entries, checks = data.draw(exclusions(around))
    spec = {**base, "timezone": str(zone)}
    model = CronSchedule if base["kind"] == "cron" else IntervalSchedule
    if model is CronSchedule:
        spec["dst_fold"] = data.draw(st.sampled_from(list(DstFoldPolicy)))
    plain = compile_schedule(model.model_validate(spec), "t/ex")
    never = [c for c in checks if isinstance(c, Fields) and not _on_some_real_date(c)]
    if never:  # e.g. `* * 30 2 *` names no real date: refused, as a schedule would be
        with pytest.raises(InvalidScheduleError, match="never matches a real date"):
            compile_schedule(model.model_validate({**spec, "exclude": entries}), "t/ex")
        return
    with_exclusions = compiled_unless_nothing_left(
        model.model_validate({**spec, "exclude": entries})
    )
    assume(with_exclusions is not None)
    assert with_exclusions is not None
    want_fired, want_skipped = _engine_run(plain, start, end)
    got_fired, got_skipped = _engine_run(with_exclusions, start, end)
    keep = [
        t
        for t in want_fired
        if not excluded(checks, plain.next_after(t * 1000 - 1).wall)  # type: ignore[union-attr]
    ]
    assert got_fired == keep, (
        str(zone),
        start,
        end,
        [getattr(e, "expression", e) for e in entries],
    )
    assert got_skipped == [s for s in want_skipped if not excluded(checks, s)]


def test_a_per_second_job_skips_a_weekend_in_one_search() -> None:
    every_second = CronSchedule(
        expression="* * * * * *",
        spread_s=0,
        timezone="Europe/London",
        exclude=[ExcludeCron(expression="* * * * 0,6"), ExcludeDates(start="2026-12-21")],
    )
    compiled = compile_schedule(every_second, "t/weekend")
    friday_last = datetime_to_ms(datetime(2026, 12, 18, 23, 59, 59, tzinfo=UTC))
    nxt = compiled.next_after(friday_last)
    assert nxt is not None and nxt.wall == datetime(2026, 12, 22, 0, 0)  # Monday was a holiday


def test_exclusions_that_leave_nothing_or_are_malformed_are_refused() -> None:
    for exclude, error in [
        ([ExcludeCron(expression="* * * * *")], "schedule.exclude: the exclusions leave no"),
        (
            [ExcludeDates(start="2026-01-01"), ExcludeCron(expression="0 0 * * * *")],
            "schedule.exclude[1].expression: 5 fields (an exclusion names minutes), got 6",
        ),
        ([ExcludeCron(expression="61 * * * *")], "schedule.exclude[0].expression: malformed"),
    ]:
        with pytest.raises(InvalidScheduleError) as refused:
            compile_schedule(CronSchedule(expression="0 9 * * *", exclude=exclude), "t/bad")
        assert refused.value.errors[0].startswith(error)
    for bad, why in [
        ({"kind": "dates", "start": "2026-02-30"}, "start: '2026-02-30' is not a date"),
        ({"kind": "dates", "start": "2026-03-02", "end": "2026-03-01"}, "end must not be before"),
        ({"kind": "dates", "start": "26-3-1"}, "String should match pattern"),
    ]:
        with pytest.raises(ValueError, match=why):
            CronSchedule.model_validate({"expression": "0 9 * * *", "exclude": [bad]})
    with pytest.raises(ValueError, match="at most 64"):
        CronSchedule.model_validate(
            {"expression": "0 9 * * *", "exclude": [{"kind": "dates", "start": "2026-01-01"}] * 65}
        )


def test_a_jump_stops_where_the_clock_goes_back_before_the_excluded_stretch() -> None:
    """London, 25 Oct 2026: 02:00 BST becomes 01:00 GMT. Minutes 30-59 of 01:xx are excluded;
    the jump from 01:30 BST must not pass the second 01:00 and 01:15 (GMT), which run."""
    schedule = CronSchedule(
        expression="*/15 * * * *",
        timezone="Europe/London",
        dst_fold=DstFoldPolicy.both,
        spread_s=0,
        exclude=[ExcludeCron(expression="30-59 1 * * *")],
    )
    compiled = compile_schedule(schedule, "t/fold")
    start = datetime_to_ms(datetime(2026, 10, 24, 23, 59, tzinfo=UTC))
    got = [datetime.fromtimestamp(o.nominal_ms / 1000, UTC) for o in compiled.upcoming(start, 5)]
    assert [t.strftime("%H:%M") for t in got] == ["00:00", "00:15", "01:00", "01:15", "02:00"]
