"""The injected clock and the instant conversions every component uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadence import clock
from kadence.clock import FakeClock, SystemClock, datetime_to_ms, ms_to_datetime

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def test_fake_clock_moves_only_forward_when_told() -> None:
    clock = FakeClock(1_000)
    assert clock.now_ms() == 1_000
    assert clock.advance(500) == 1_500
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)
    clock.set(10)
    assert clock.now_ms() == 10


def test_system_clock_is_wall_time() -> None:
    before = datetime.now(UTC)
    now = ms_to_datetime(SystemClock().now_ms())
    assert before - timedelta(seconds=1) <= now <= datetime.now(UTC) + timedelta(seconds=1)


def test_millisecond_conversions_are_exact() -> None:
    t = datetime(2026, 3, 29, 1, 30, 0, 123_000, tzinfo=timezone(timedelta(hours=2)))
    ms = datetime_to_ms(t)
    assert ms % 1000 == 123
    assert ms_to_datetime(ms) == t
    far = datetime(2999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)
    assert ms_to_datetime(datetime_to_ms(far)) == far
    with pytest.raises(ValueError, match="naive"):
        datetime_to_ms(datetime(2026, 1, 1))


@given(st.lists(st.integers(min_value=-(10**12), max_value=32_503_680_000_000), max_size=50))
def test_kept_instants_are_the_instants(values: list[int]) -> None:
    """The datetimes `ms_to_datetime` keeps are the ones it computes: read twice, any order."""
    for ms in values + values[::-1]:
        at = ms_to_datetime(ms)
        assert at == EPOCH + timedelta(milliseconds=ms)
        assert at.tzinfo is UTC and datetime_to_ms(at) == ms


def test_kept_instants_stay_bounded_and_shared() -> None:
    first = ms_to_datetime(1_000)
    assert ms_to_datetime(1_000) is first  # one datetime per instant while it is kept
    for ms in range(2 * clock.INSTANTS_KEPT):
        ms_to_datetime(10_000 + ms)
    assert len(clock._INSTANTS) <= clock.INSTANTS_KEPT
    assert ms_to_datetime(1_000) == first
