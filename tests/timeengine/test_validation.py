"""Bad schedules are refused with an error that names the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kadence.errors import InvalidScheduleError
from kadence.models import CronSchedule
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.cron import parse_cron


def _errors(**kw: object) -> list[str]:
    with pytest.raises(InvalidScheduleError) as err:
        compile_schedule(CronSchedule.model_construct(**{"timezone": "UTC", **kw}), "acme/j")  # type: ignore[arg-type]
    return err.value.errors


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("", "must not be empty"),
        ("* * *", "expected 5 fields"),
        ("* * * * * * *", "expected 5 fields"),
        ("61 * * * *", "malformed cron expression"),
        ("0 25 * * *", "malformed cron expression"),
        ("0 0 * * funday", "malformed cron expression"),
        ("@reboot", "unknown macro"),
        ("0 0 30 2 *", "never matches"),
        ("0 0 31 4,6,9,11 *", "never matches"),
    ],
)
def test_bad_expressions(expression: str, fragment: str) -> None:
    errors = _errors(expression=expression)
    assert len(errors) == 1
    assert errors[0].startswith("schedule.expression: ")
    assert fragment in errors[0]


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus_Mons", "+05:00", "EST5EDT6", "../../etc/passwd", ""]
)
def test_unknown_zones(zone: str) -> None:
    errors = _errors(expression="0 9 * * *", timezone=zone)
    assert len(errors) == 1
    assert errors[0].startswith(f"schedule.timezone: unknown IANA time zone {zone!r} (e.g. ")


def test_every_problem_is_reported_at_once() -> None:
    errors = _errors(expression="0 0 30 2 *", timezone="Nowhere/Land")
    assert [e.split(":")[0] for e in errors] == ["schedule.timezone", "schedule.expression"]


def test_end_before_start() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    errors = _errors(expression="0 9 * * *", start_at=t, end_at=t)
    assert errors == ["schedule.end_at: must be after start_at"]


def test_bounds_with_no_occurrence_between_them() -> None:
    errors = _errors(
        expression="0 9 * * *",
        start_at=datetime(2026, 1, 1, 10, tzinfo=UTC),
        end_at=datetime(2026, 1, 2, 8, tzinfo=UTC),
    )
    assert errors == ["schedule.end_at: no occurrence between start_at and end_at"]


def test_spread_wider_than_the_interval() -> None:
    errors = _errors(expression="*/5 * * * *", spread_s=301)
    assert errors == [
        "schedule.spread_s: 301 s must not exceed the schedule's shortest interval (300 s)"
    ]


def test_accepted_forms() -> None:
    assert parse_cron("@hourly").normalized == "0 * * * *"
    assert parse_cron("0 0 * * 5L").normalized == "0 0 * * l5"  # Quartz-style last Friday
    assert parse_cron("0 0 5-5 * *").normalized == "0 0 5 * *"  # croniter reads 5-5 as *
    assert parse_cron("30 0 9 * * *").has_seconds
    h1, h2 = parse_cron("H H * * *", "acme/a"), parse_cron("H H * * *", "acme/b")
    start = datetime(2026, 1, 1)
    assert h1.next_local(start) == parse_cron("H H * * *", "acme/a").next_local(start)
    assert h1.next_local(start) != h2.next_local(start)  # hashed per job, stable per job


def test_bounds_are_honoured() -> None:
    start, end = datetime(2026, 1, 5, tzinfo=UTC), datetime(2026, 1, 8, 9, tzinfo=UTC)
    compiled = compile_schedule(
        CronSchedule(expression="0 9 * * *", start_at=start, end_at=end), "acme/j"
    )
    got = [datetime.fromtimestamp(o.nominal_ms / 1000, UTC).day for o in compiled.upcoming(0, 10)]
    assert got == [5, 6, 7, 8]


@pytest.mark.parametrize(
    ("field", "at"),
    [
        ("start_at", datetime(9999, 6, 1, tzinfo=UTC)),
        ("start_at", datetime(1, 6, 1, tzinfo=UTC)),
        ("end_at", datetime(9999, 12, 31, tzinfo=UTC)),
        ("end_at", datetime(1899, 12, 31, tzinfo=UTC)),
    ],
)
def test_bounds_at_the_ends_of_the_calendar_are_refused_by_name_not_crashed_on(
    field: str, at: datetime
) -> None:
    """Year 9999 or year 1 made the engine step past Python's calendar: a ValueError, not a
    refusal naming the field (the API answered 500)."""
    assert _errors(expression="0 0 * * *", **{field: at}) == [
        f"schedule.{field}: must be from 1900-01-01 and before 9000-01-01"
    ]
