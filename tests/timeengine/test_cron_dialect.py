"""What `L`, `LW`, `L-n`, `nW`, `d#n` and `dL` match, against an oracle built from the calendar
module (not croniter), over random months; and the forms that name no day refused."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadence.errors import InvalidScheduleError
from kadence.timeengine.cron import parse_cron

MONTHS = st.tuples(st.integers(1970, 2199), st.integers(1, 12))
DOW = st.integers(0, 7)  # cron: 0 and 7 are Sunday


def fired_days(expression: str, year: int, month: int) -> list[int]:
    """The days of `month` on which `expression` fires (walking the engine's matcher)."""
    spec = parse_cron(expression)
    t: datetime | None = datetime(year, month, 1) - timedelta(seconds=1)
    days = []
    while t is not None:
        t = spec.next_local(t)
        if t is None or (t.year, t.month) != (year, month):
            break
        days.append(t.day)
    return days


def weekdays_named(year: int, month: int, cron_dow: int) -> list[int]:
    python_dow = (cron_dow - 1) % 7  # calendar: Monday 0 ... Sunday 6; cron: Sunday 0 or 7
    last = calendar.monthrange(year, month)[1]
    return [d for d in range(1, last + 1) if calendar.weekday(year, month, d) == python_dow]


def nearest_weekday(year: int, month: int, day: int) -> int:
    """Quartz's `nW`, never leaving the month; a day past the month's end counts as its last."""
    last = calendar.monthrange(year, month)[1]
    day = min(day, last)
    weekday = calendar.weekday(year, month, day)
    if weekday == calendar.SATURDAY:
        return day - 1 if day > 1 else day + 2
    if weekday == calendar.SUNDAY:
        return day + 1 if day < last else day - 2
    return day


@settings(max_examples=300, deadline=None)
@given(MONTHS)
def test_l_is_the_last_day_of_the_month(ym: tuple[int, int]) -> None:
    assert fired_days("0 0 L * *", *ym) == [calendar.monthrange(*ym)[1]]


@settings(max_examples=300, deadline=None)
@given(MONTHS, st.integers(1, 31))
def test_n_w_is_the_weekday_nearest_day_n_within_the_month(ym: tuple[int, int], day: int) -> None:
    assert fired_days(f"0 0 {day}W * *", *ym) == [nearest_weekday(*ym, day)]


@settings(max_examples=300, deadline=None)
@given(MONTHS, DOW, st.integers(1, 5))
def test_d_hash_n_is_the_nth_such_weekday_and_none_when_the_month_has_fewer(
    ym: tuple[int, int], dow: int, n: int
) -> None:
    days = weekdays_named(*ym, dow)
    assert fired_days(f"0 0 * * {dow}#{n}", *ym) == days[n - 1 : n]


@settings(max_examples=300, deadline=None)
@given(MONTHS, DOW, st.sampled_from(["{d}L", "L{d}"]))
def test_d_l_is_the_last_such_weekday(ym: tuple[int, int], dow: int, form: str) -> None:
    assert fired_days(f"0 0 * * {form.format(d=dow)}", *ym) == weekdays_named(*ym, dow)[-1:]


def last_weekday(year: int, month: int) -> int:
    day = calendar.monthrange(year, month)[1]
    while calendar.weekday(year, month, day) >= calendar.SATURDAY:
        day -= 1
    return day


@settings(max_examples=300, deadline=None)
@given(MONTHS)
def test_lw_is_the_last_weekday_of_the_month(ym: tuple[int, int]) -> None:
    assert fired_days("0 0 LW * *", *ym) == [last_weekday(*ym)]


@settings(max_examples=300, deadline=None)
@given(MONTHS, st.integers(0, 30))
def test_l_minus_n_is_n_days_before_the_last_and_none_in_a_shorter_month(
    ym: tuple[int, int], n: int
) -> None:
    day = calendar.monthrange(*ym)[1] - n
    assert fired_days(f"0 0 L-{n} * *", *ym) == ([day] if day >= 1 else [])


@settings(max_examples=200, deadline=None)
@given(MONTHS, st.sets(st.integers(1, 31), max_size=4), st.integers(0, 9))
def test_month_days_combine_with_day_numbers_as_a_list(
    ym: tuple[int, int], numbers: set[int], n: int
) -> None:
    last = calendar.monthrange(*ym)[1]
    dom = ",".join([*map(str, sorted(numbers)), "LW", f"L-{n}"])
    expected = {d for d in numbers if d <= last} | {last_weekday(*ym), last - n}
    assert fired_days(f"0 0 {dom} * *", *ym) == sorted(expected)


@settings(max_examples=200, deadline=None)
@given(MONTHS, DOW, st.sampled_from(["LW", "L-2", "L-29"]))
def test_month_days_with_a_weekday_match_either_as_vixie_cron(
    ym: tuple[int, int], dow: int, dom: str
) -> None:
    last = calendar.monthrange(*ym)[1]
    named = last_weekday(*ym) if dom == "LW" else last - int(dom[2:])
    days = set(weekdays_named(*ym, dow)) | ({named} if named >= 1 else set())
    assert fired_days(f"0 0 {dom} * {dow}", *ym) == sorted(days)


def test_month_days_are_matched_and_a_month_without_one_is_skipped() -> None:
    spec = parse_cron("30 6 L-29 * *")  # only in 30- and 31-day months
    assert spec.matches(datetime(2025, 3, 2, 6, 30)) and not spec.matches(datetime(2025, 3, 1))
    assert spec.next_local(datetime(2025, 1, 31)) == datetime(2025, 3, 2, 6, 30)  # not Feb
    assert parse_cron("0 0 LW 2 *").next_local(datetime(2027, 3, 1)) == datetime(2028, 2, 29)


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("0 0 L-31 * *", "`L-31`: n in `L-n` must be 0 to 30"),
        ("0 0 LW/2 * *", "malformed cron expression '0 0 LW/2 * *'"),
        ("0 0 L-3W * *", "malformed cron expression '0 0 L-3W * *'"),
    ],
)
def test_month_day_forms_that_name_no_day_are_refused(expression: str, error: str) -> None:
    with pytest.raises(InvalidScheduleError) as refused:
        parse_cron(expression)
    [message] = refused.value.errors
    assert message.startswith("schedule.expression: ") and error in message
