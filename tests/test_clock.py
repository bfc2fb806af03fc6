"""The injected clock and the instant conversions every component uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from kadence.clock import FakeClock, SystemClock, datetime_to_ms, ms_to_datetime


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
