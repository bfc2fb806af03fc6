"""The engine agrees with the brute-force oracle across DST transitions, in every policy."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence.errors import InvalidScheduleError
from kadence.models import CronSchedule, DstFoldPolicy, DstGapPolicy
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import CompiledSchedule
from kadence.timeengine.zones import year_transitions

from .oracle import Fields, _values, oracle

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe",  # 30-minute DST
    "Pacific/Chatham",  # +12:45 / +13:45
    "Europe/Dublin",  # negative DST in the tz database
    "Africa/Casablanca",  # negative DST, suspended every Ramadan
    "America/Sao_Paulo",  # southern hemisphere, DST abolished in 2019
    "America/Santiago",
    "Asia/Tehran",  # DST abolished in 2022
    "Europe/Moscow",  # permanent DST 2011, then back in 2014
    "Antarctica/Troll",  # 2-hour DST
    "Antarctica/Casey",  # 3-hour jumps
    "America/St_Johns",  # -3:30
    "Pacific/Apia",  # skipped 30 Dec 2011 entirely
    "Asia/Kolkata",  # no DST
]


def _field(lo: int, hi: int, hot: list[int] | None = None) -> st.SearchStrategy[str]:
    value = st.sampled_from(hot) if hot else st.integers(lo, hi)
    single = st.one_of(value, st.integers(lo, hi)).map(str)
    ranged = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(
        lambda ab: f"{min(ab)}-{max(ab)}"
    )
    step = st.integers(1, max(1, (hi - lo) // 2))
    return st.one_of(
        st.just("*"),
        step.map(lambda n: f"*/{n}"),
        single,
        ranged,
        st.tuples(ranged, step).map(lambda rs: f"{rs[0]}/{rs[1]}"),
        st.lists(single, min_size=2, max_size=4, unique=True).map(",".join),
    )


MINUTE = _field(0, 59, [0, 15, 30, 45, 59])
HOUR = _field(0, 23, [0, 1, 2, 3, 23])
DOM = st.one_of(
    st.just("*"),
    st.just("*"),
    _field(1, 31),
    st.sampled_from(["LW", "L-0", "L-1", "L-3", "L-6", "1,LW", "L-2,15"]),  # Quartz, per month
)
MONTH = st.one_of(st.just("*"), st.just("*"), st.just("*"), _field(1, 12))
DOW = st.one_of(st.just("*"), st.just("*"), _field(0, 6))
FIELDS = st.builds(Fields, minute=MINUTE, hour=HOUR, dom=DOM, month=MONTH, dow=DOW)
SECOND_FIELDS = st.builds(
    Fields,
    second=st.sampled_from(["0", "30", "*/20", "0,59", "10-12"]),
    minute=st.sampled_from(["*", "0", "*/30", "29-31", "59"]),
    hour=HOUR,
    dom=st.just("*"),
    month=st.just("*"),
    dow=st.just("*"),
)


@st.composite
def window(draw: st.DrawFn, around_s: int) -> tuple[zoneinfo.ZoneInfo, int, int]:
    """A zone and a range of UTC seconds that usually straddles one of its transitions."""
    zone = zoneinfo.ZoneInfo(draw(st.sampled_from(ZONES)))
    year = draw(st.integers(1985, 2035))
    transitions = year_transitions(zone, year)
    if transitions and draw(st.integers(0, 9)) > 0:
        center = draw(st.sampled_from(transitions)).at_s
    else:
        center = int(datetime(year, draw(st.integers(1, 12)), 15).timestamp())
    start = center - draw(st.integers(0, around_s))
    end = center + draw(st.integers(1, around_s))
    return zone, start, end


def _engine_run(
    compiled: CompiledSchedule, start_s: int, end_s: int
) -> tuple[list[int], list[datetime]]:
    fired: list[int] = []
    skipped: list[datetime] = []
    cursor = start_s * 1000
    while True:
        occ, passed = compiled.next_with_skipped(cursor)
        skipped.extend(o.wall for o in passed if o.nominal_ms <= end_s * 1000)
        if occ is None or occ.nominal_ms > end_s * 1000:
            return fired, skipped
        assert occ.nominal_ms > cursor, "the cursor must move strictly forward"
        fired.append(occ.nominal_ms // 1000)
        cursor = occ.nominal_ms


def _check(fields: Fields, w: tuple[zoneinfo.ZoneInfo, int, int], gap: str, fold: str) -> None:
    zone, start, end = w
    schedule = CronSchedule(
        expression=fields.expression,
        timezone=str(zone),
        dst_gap=DstGapPolicy(gap),
        dst_fold=DstFoldPolicy(fold),
    )
    if not _on_some_real_date(fields):  # e.g. `* * 30,31 2 *`: refused, not run forever
        with pytest.raises(InvalidScheduleError, match="never matches a real date"):
            compile_schedule(schedule, "t/oracle")
        return
    compiled = compile_schedule(schedule, "t/oracle")
    want = oracle(fields, zone, start, end, gap, fold)
    got = _engine_run(compiled, start, end)
    assert got[0] == want[0], (fields.expression, str(zone), start, end, gap, fold)
    assert got[1] == want[1], "skipped gap occurrences differ"


def _on_some_real_date(fields: Fields) -> bool:
    """Whether the oracle matches the fields on some day from 2024 on, at the first second,
    minute and hour they name: 28 years, after which weekdays fall on the same dates again."""
    second = min(_values(fields.second, 0, 59)) if fields.second is not None else 0
    minute, hour = min(_values(fields.minute, 0, 59)), min(_values(fields.hour, 0, 23))
    first = datetime(2024, 1, 1, hour, minute, second)
    return any(fields.matches(first + timedelta(days=d)) for d in range(28 * 366))


POLICIES = st.tuples(
    st.sampled_from(["shift", "skip"]), st.sampled_from(["auto", "first", "last", "both"])
)


@given(fields=FIELDS, w=window(around_s=30 * 3600), policies=POLICIES)
def test_engine_agrees_with_the_oracle(
    fields: Fields, w: tuple[zoneinfo.ZoneInfo, int, int], policies: tuple[str, str]
) -> None:
    _check(fields, w, *policies)


@given(fields=SECOND_FIELDS, w=window(around_s=3 * 3600), policies=POLICIES)
def test_engine_agrees_with_the_oracle_to_the_second(
    fields: Fields, w: tuple[zoneinfo.ZoneInfo, int, int], policies: tuple[str, str]
) -> None:
    _check(fields, w, *policies)


@given(
    fields=st.lists(FIELDS, min_size=2, max_size=3),
    w=window(around_s=30 * 3600),
    policies=POLICIES,
)
def test_several_expressions_run_at_the_union_of_what_the_oracle_finds_for_each(
    fields: list[Fields], w: tuple[zoneinfo.ZoneInfo, int, int], policies: tuple[str, str]
) -> None:
    """`also` (issue 31): every instant any expression names, once; the DST-skipped wall
    times of all of them, each once."""
    zone, start, end = w
    gap, fold = policies
    if not all(_on_some_real_date(f) for f in fields):
        return  # refused, as each alone is (test_engine_agrees_with_the_oracle)
    schedule = CronSchedule(
        expression=fields[0].expression,
        also=[f.expression for f in fields[1:]],
        timezone=str(zone),
        dst_gap=DstGapPolicy(gap),
        dst_fold=DstFoldPolicy(fold),
    )
    compiled = compile_schedule(schedule, "t/oracle")
    each = [oracle(f, zone, start, end, gap, fold) for f in fields]
    fired, skipped = _engine_run(compiled, start, end)
    assert fired == sorted({t for instants, _ in each for t in instants})
    assert sorted(set(skipped)) == sorted({wall for _, walls in each for wall in walls})
    assert len(skipped) == len(set(skipped))
