"""A tz database change recomputes the affected cursors and lists what moved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

from kadence.clock import datetime_to_ms
from kadence.models import CronSchedule, OnceSchedule
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.tzupdate import CursorState, Shift, recompute
from kadence.timeengine.zones import load_zone

CURSOR = datetime_to_ms(datetime(2026, 6, 1, tzinfo=UTC))  # summer: London on BST


def _new_rules(name: str) -> tzinfo:
    """A tz database in which the UK has abolished summer time."""
    if name == "Europe/London":
        return timezone(timedelta(0), "GMT")
    return load_zone(name)


def _state(job: str, schedule: CronSchedule | OnceSchedule) -> CursorState:
    occ = compile_schedule(schedule, job).next_after(CURSOR)
    return CursorState(job, schedule, CURSOR, occ.nominal_ms if occ else None, "2025b")


def test_only_jobs_whose_next_occurrence_moved_are_reported() -> None:
    london = _state("acme/london", CronSchedule(expression="0 9 * * *", timezone="Europe/London"))
    utc = _state("acme/utc", CronSchedule(expression="0 9 * * *", timezone="UTC"))
    new_york = _state("acme/ny", CronSchedule(expression="0 9 * * *", timezone="America/New_York"))
    once = _state("acme/once", OnceSchedule(run_at=datetime(2026, 7, 1, tzinfo=UTC)))

    updated, shifts = recompute([london, utc, new_york, once], "2099a", zones=_new_rules)

    assert shifts == [
        Shift(
            "acme/london",
            "Europe/London",
            datetime_to_ms(datetime(2026, 6, 1, 8, tzinfo=UTC)),  # 09:00 BST
            datetime_to_ms(datetime(2026, 6, 1, 9, tzinfo=UTC)),  # 09:00 under the new rules
        )
    ]
    assert all(s.tzdb_version == "2099a" for s in updated)
    assert updated[0].next_nominal_ms == shifts[0].new_nominal_ms
    assert updated[1:] == [
        s.__class__(**{**s.__dict__, "tzdb_version": "2099a"}) for s in (utc, new_york, once)
    ]


def test_same_version_is_a_no_op() -> None:
    london = _state("acme/london", CronSchedule(expression="0 9 * * *", timezone="Europe/London"))
    updated, shifts = recompute([london], "2025b", zones=_new_rules)
    assert shifts == []
    assert updated == [london]
