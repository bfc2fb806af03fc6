"""What `L`, `nW`, `d#n` and `dL` match, against an oracle built from the calendar module (not
croniter), over random months; and the Quartz forms refused with what to write instead."""

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


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("0 0 LW * *", "`L` (the last day) or, for one weekday, `5L`"),
        ("0 0 L-3 * *", "`L` (the last day) or a day number"),
        ("0 0 1,L-2 * *", "`L` (the last day) or a day number"),
    ],
)
def test_quartz_forms_croniter_cannot_evaluate_are_refused_with_the_alternative(
    expression: str, names: str
) -> None:
    with pytest.raises(InvalidScheduleError) as refused:
        parse_cron(expression)
    [error] = refused.value.errors
    assert error.startswith("schedule.expression: ")
    assert "is not supported" in error and names in error
