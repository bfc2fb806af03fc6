"""The classic DST cases, spelled out: what a user would check with `kadence preview`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.models import CronSchedule, DstFoldPolicy, DstGapPolicy
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import DstNote, local_time


def _run(
    expr: str, tz: str, start: datetime, end: datetime, gap: str = "shift", fold: str = "auto"
) -> list[tuple[str, str, str | None]]:
    """(UTC, local, DST note) for every firing in [start, end)."""
    compiled = compile_schedule(
        CronSchedule(
            expression=expr,
            timezone=tz,
            dst_gap=DstGapPolicy(gap),
            dst_fold=DstFoldPolicy(fold),
        ),
        "acme/job",
    )
    out = []
    for occ in compiled.upcoming(datetime_to_ms(start) - 1, 500):
        if occ.nominal_ms >= datetime_to_ms(end):
            break
        utc = ms_to_datetime(occ.nominal_ms).strftime("%m-%d %H:%M")
        local = local_time(compiled.zone, occ.nominal_ms).strftime("%m-%d %H:%M %Z")
        out.append((utc, local, occ.note.value if occ.note else None))
    return out


def d(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


# Spring forward: New York 2026-03-08 02:00 EST -> 03:00 EDT; London 2026-03-29 01:00 -> 02:00;
# Sydney 2026-10-04 02:00 AEST -> 03:00 AEDT.
SPRING = [
    (
        "America/New_York",
        d(2026, 3, 7, 12),
        d(2026, 3, 9, 12),
        "30 2 * * *",
        [("03-08 07:00", "03-08 03:00 EDT", "shifted"), ("03-09 06:30", "03-09 02:30 EDT", None)],
    ),
    (
        "Europe/London",
        d(2026, 3, 28, 12),
        d(2026, 3, 30, 12),
        "30 1 * * *",
        [("03-29 01:00", "03-29 02:00 BST", "shifted"), ("03-30 00:30", "03-30 01:30 BST", None)],
    ),
    (
        "Australia/Sydney",
        d(2026, 10, 3, 0),
        d(2026, 10, 5, 0),
        "30 2 * * *",
        [("10-03 16:00", "10-04 03:00 AEDT", "shifted"), ("10-04 15:30", "10-05 02:30 AEDT", None)],
    ),
]


@pytest.mark.parametrize(("tz", "start", "end", "expr", "want"), SPRING, ids=[s[0] for s in SPRING])
def test_spring_forward_shifts_to_the_end_of_the_gap(
    tz: str, start: datetime, end: datetime, expr: str, want: list[tuple[str, str, str | None]]
) -> None:
    assert _run(expr, tz, start, end) == want


@pytest.mark.parametrize(("tz", "start", "end", "expr", "want"), SPRING, ids=[s[0] for s in SPRING])
def test_spring_forward_skip_policy_drops_it(
    tz: str, start: datetime, end: datetime, expr: str, want: list[tuple[str, str, str | None]]
) -> None:
    assert _run(expr, tz, start, end, gap="skip") == want[1:]


# Fall back: New York 2026-11-01 02:00 EDT -> 01:00 EST; London 2026-10-25 02:00 -> 01:00;
# Sydney 2026-04-05 03:00 AEDT -> 02:00 AEST.
def test_fixed_time_in_the_repeated_hour_fires_once_by_default() -> None:
    got = _run("30 1 * * *", "America/New_York", d(2026, 10, 31, 12), d(2026, 11, 2, 12))
    assert got == [
        ("11-01 05:30", "11-01 01:30 EDT", "fold_first"),
        ("11-02 06:30", "11-02 01:30 EST", None),
    ]


@pytest.mark.parametrize(
    ("fold", "want"),
    [
        ("first", [("10-25 00:30", "10-25 01:30 BST", "fold_first")]),
        ("last", [("10-25 01:30", "10-25 01:30 GMT", "fold_second")]),
        (
            "both",
            [
                ("10-25 00:30", "10-25 01:30 BST", "fold_first"),
                ("10-25 01:30", "10-25 01:30 GMT", "fold_second"),
            ],
        ),
    ],
)
def test_fold_policies_in_london(fold: str, want: list[tuple[str, str, str | None]]) -> None:
    assert (
        _run("30 1 * * *", "Europe/London", d(2026, 10, 24, 12), d(2026, 10, 25, 12), fold=fold)
        == want
    )


def test_sydney_autumn_fold() -> None:
    got = _run("30 2 * * *", "Australia/Sydney", d(2026, 4, 4, 12), d(2026, 4, 5, 12))
    assert got == [("04-04 15:30", "04-05 02:30 AEDT", "fold_first")]


def test_hourly_through_both_transitions_in_new_york() -> None:
    spring = _run("0 * * * *", "America/New_York", d(2026, 3, 8, 5), d(2026, 3, 8, 9))
    assert spring == [
        ("03-08 05:00", "03-08 00:00 EST", None),
        ("03-08 06:00", "03-08 01:00 EST", None),
        # 02:00 does not exist: it moves to 03:00, which is also the 03:00 run: one firing
        ("03-08 07:00", "03-08 03:00 EDT", "shifted"),
        ("03-08 08:00", "03-08 04:00 EDT", None),
    ]
    autumn = _run("0 * * * *", "America/New_York", d(2026, 11, 1, 4), d(2026, 11, 1, 8))
    assert autumn == [
        ("11-01 04:00", "11-01 00:00 EDT", None),
        ("11-01 05:00", "11-01 01:00 EDT", "fold_first"),
        ("11-01 06:00", "11-01 01:00 EST", "fold_second"),  # wildcard hour: both copies
        ("11-01 07:00", "11-01 02:00 EST", None),
    ]


def test_every_15_minutes_through_both_transitions_in_sydney() -> None:
    spring = _run(
        "*/15 * * * *", "Australia/Sydney", d(2026, 10, 3, 15, 30), d(2026, 10, 3, 16, 31)
    )
    assert [local for _, local, _ in spring] == [
        "10-04 01:30 AEST",
        "10-04 01:45 AEST",
        "10-04 03:00 AEDT",
        "10-04 03:15 AEDT",
        "10-04 03:30 AEDT",
    ]
    autumn = _run("*/15 * * * *", "Australia/Sydney", d(2026, 4, 4, 15, 30), d(2026, 4, 4, 17, 1))
    assert [local for _, local, _ in autumn] == [
        "04-05 02:30 AEDT",
        "04-05 02:45 AEDT",
        "04-05 02:00 AEST",
        "04-05 02:15 AEST",
        "04-05 02:30 AEST",
        "04-05 02:45 AEST",
        "04-05 03:00 AEST",
    ]
    assert len({utc for utc, _, _ in autumn}) == len(autumn)  # no instant twice


def test_every_15_minutes_with_fold_first_never_runs_the_repeat() -> None:
    got = _run(
        "*/15 * * * *",
        "America/New_York",
        d(2026, 11, 1, 5, 30),
        d(2026, 11, 1, 7, 1),
        fold="first",
    )
    assert [local for _, local, _ in got] == [
        "11-01 01:30 EDT",
        "11-01 01:45 EDT",
        "11-01 02:00 EST",
    ]


def test_weekday_nine_am_across_march_london_vs_new_york() -> None:
    """Europe and the US change clocks on different Sundays: the gap between them moves."""
    london = _run("0 9 * * 1-5", "Europe/London", d(2026, 3, 2), d(2026, 4, 1))
    new_york = _run("0 9 * * 1-5", "America/New_York", d(2026, 3, 2), d(2026, 4, 1))
    assert len(london) == len(new_york) == 22
    assert all(local.endswith(("09:00 GMT", "09:00 BST")) for _, local, _ in london)
    assert {utc[-5:] for utc, _, _ in london} == {"09:00", "08:00"}
    assert london[-3][0] == "03-27 09:00" and london[-2][0] == "03-30 08:00"  # after 29 Mar
    assert new_york[5][0] == "03-09 13:00"  # first Monday of EDT (8 Mar)
    assert new_york[4][0] == "03-06 14:00"
    gaps_h = {int(ny[0][6:8]) - int(ld[0][6:8]) for ld, ny in zip(london, new_york, strict=True)}
    assert gaps_h == {5, 4}  # 4 h apart between the two changes, 5 h otherwise
    assert DstNote.shifted not in {n for _, _, n in london + new_york}
