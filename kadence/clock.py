"""Time as an injected dependency: domain code never calls `time.time()` itself.

`SystemClock` is what processes use; `FakeClock` is what tests advance by hand.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Wall-clock milliseconds since the Unix epoch (UTC)."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The machine's wall clock, optionally shifted (fault tests jump time this way)."""

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms


class FakeClock:
    """A clock that moves only when a test says so."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a FakeClock only moves forward; use set() to jump")
        self._now += ms
        return self._now

    def set(self, ms: int) -> None:
        self._now = ms


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


INSTANTS_KEPT = 8_192
"""Instants whose datetime `ms_to_datetime` keeps (cleared when full): the runs of a second
share their nominal and due instants and a turn its now, so the scheduler, dispatching
thousands a second, built the same few datetimes again and again (three per execution)."""
_INSTANTS: dict[int, datetime] = {}


def ms_to_datetime(ms: int) -> datetime:
    """The aware UTC datetime of `ms`, kept: a datetime is immutable, so one is shared."""
    at = _INSTANTS.get(ms)
    if at is None:
        at = _EPOCH + timedelta(milliseconds=ms)
        if len(_INSTANTS) >= INSTANTS_KEPT:
            _INSTANTS.clear()
        _INSTANTS[ms] = at
    return at


def datetime_to_ms(dt: datetime) -> int:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: Kadence instants must carry a time zone")
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def now_utc(clock: Clock) -> datetime:
    return ms_to_datetime(clock.now_ms())
