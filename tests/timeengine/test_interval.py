"""Interval schedules (issue 31): elapsed-time instants `offset + k * every` after the epoch,
checked against a brute-force enumeration of those instants, in every zone and across DST."""

from __future__ import annotations

import itertools
import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kadence.clock import datetime_to_ms
from kadence.errors import InvalidScheduleError
from kadence.models import IntervalSchedule
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.zones import year_transitions

from .test_oracle import ZONES

EVERY = st.one_of(
    st.sampled_from([1, 60, 90 * 60, 3600, 86_400, 7 * 86_400]), st.integers(1, 366 * 86_400)
)
CURSOR_MS = st.integers(datetime_to_ms(datetime(1990, 1, 1, tzinfo=UTC)), 4_000_000_000_000)


def enumerated(every_ms: int, offset_ms: int, after_ms: int, count: int) -> list[int]:
    """The instants after `after_ms`, found by walking k from below (not by the formula)."""
    k = max(0, (after_ms - offset_ms) // every_ms - 2)
    out: list[int] = []
    while len(out) < count:
        at = offset_ms + k * every_ms
        if at > after_ms:
            out.append(at)
        k += 1
    return out


@settings(max_examples=400, deadline=None)
@given(EVERY, st.data(), CURSOR_MS, st.sampled_from(ZONES))
def test_instants_are_offset_plus_multiples_of_every_whatever_the_zone(
    every_s: int, data: st.DataObject, cursor_ms: int, zone: str
) -> None:
    offset_s = data.draw(st.integers(0, every_s - 1))
    schedule = IntervalSchedule(every_s=every_s, offset_s=offset_s, timezone=zone)
    compiled = compile_schedule(schedule, "t/interval")
    got = compiled.upcoming(cursor_ms, 5)
    assert [o.nominal_ms for o in got] == enumerated(every_s * 1000, offset_s * 1000, cursor_ms, 5)
    assert all(o.due_ms == o.nominal_ms for o in got)  # no spread unless asked
    in_utc = compile_schedule(schedule.model_copy(update={"timezone": "UTC"}), "t/interval")
    assert [o.nominal_ms for o in in_utc.upcoming(cursor_ms, 5)] == [o.nominal_ms for o in got]
    for occ in got:  # the wall time shown is the instant's local time in the zone
        local = datetime.fromtimestamp(occ.nominal_ms / 1000, zoneinfo.ZoneInfo(zone))
        assert occ.wall == local.replace(tzinfo=None)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ZONES), st.integers(1990, 2035), st.sampled_from([900, 5400, 3600]))
def test_across_a_clock_change_the_runs_stay_every_apart(zone: str, year: int, every: int) -> None:
    transitions = year_transitions(zoneinfo.ZoneInfo(zone), year)
    if not transitions:
        return
    around_ms = transitions[0].at_s * 1000 - 4 * 3600 * 1000
    compiled = compile_schedule(IntervalSchedule(every_s=every, timezone=zone), "t/dst")
    got = [o.nominal_ms for o in compiled.upcoming(around_ms, 8 * 3600 // every + 1)]
    assert all(b - a == every * 1000 for a, b in itertools.pairwise(got))
    walls = [o.wall for o in compiled.upcoming(around_ms, 8 * 3600 // every + 1)]
    assert any(b - a != timedelta(seconds=every) for a, b in itertools.pairwise(walls))


@settings(max_examples=200, deadline=None)
@given(EVERY, CURSOR_MS, st.integers(1, 10**9), st.integers(1, 10**10))
def test_bounds_and_spread(every_s: int, cursor_ms: int, start_after: int, length: int) -> None:
    start = datetime.fromtimestamp(cursor_ms // 1000 + start_after, UTC)  # after the cursor
    end = start + timedelta(milliseconds=length)
    spread = min(60, every_s - 1)
    schedule = IntervalSchedule(every_s=every_s, start_at=start, end_at=end, spread_s=spread)
    start_ms, end_ms = datetime_to_ms(start), datetime_to_ms(end)
    expected = [t for t in enumerated(every_s * 1000, 0, start_ms - 1, 4) if t <= end_ms]
    if not expected:
        with pytest.raises(InvalidScheduleError) as refused:
            compile_schedule(schedule, "t/bounded")
        assert refused.value.errors == [
            "schedule.end_at: no occurrence between start_at and end_at"
        ]
        return
    got = compile_schedule(schedule, "t/bounded").upcoming(cursor_ms, 4)
    assert [o.nominal_ms for o in got] == expected
    assert all(o.nominal_ms <= o.due_ms < o.nominal_ms + max(spread, 1) * 1000 for o in got)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"every_s": 0}, "greater than or equal to 1"),
        ({"every_s": 366 * 86_400 + 1}, "less than or equal to"),
        ({"every_s": 60, "offset_s": 60}, "offset_s must be below every_s"),
        ({"every_s": 60, "spread_s": 60}, "spread_s must be below every_s"),
        (
            {"every_s": 60, "start_at": "2027-01-02T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"},
            "end_at must be after start_at",
        ),
    ],
)
def test_bad_intervals_are_refused_naming_the_field(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        IntervalSchedule.model_validate(fields)


def test_an_unknown_zone_and_bounds_outside_the_calendar_name_their_fields() -> None:
    """The model refuses an instant past 9000 itself; the engine names it in a schedule built
    without the model."""
    end_at = datetime(9500, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match=r"end_at\n.*before 9000-01-01"):
        IntervalSchedule(every_s=60, end_at=end_at)
    bad = IntervalSchedule.model_construct(every_s=60, timezone="Mars/Olympus", end_at=end_at)
    with pytest.raises(InvalidScheduleError) as refused:
        compile_schedule(bad, "t/bad")
    assert [e.split(":")[0] for e in refused.value.errors] == [
        "schedule.end_at",
        "schedule.timezone",
    ]
