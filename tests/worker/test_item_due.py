"""An execution's due milliseconds, kept by instant (streams/worker/item.py `due_ms`), are
`datetime_to_ms`'s in any zone, every time; a naive instant fails every time; what is kept
stays bounded. No broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings

from kadence.clock import datetime_to_ms
from streams.worker import item
from streams.worker.item import DUE_KEPT, due_ms
from tests.test_codec_fast import instants


@settings(max_examples=300, deadline=None)
@given(at=instants)
def test_kept_or_not_the_milliseconds_are_datetime_to_ms(at: datetime) -> None:
    for _ in range(2):  # the second call takes what the first kept
        assert due_ms(at) == datetime_to_ms(at)
    assert due_ms(at.astimezone(timezone(timedelta(hours=-7)))) == datetime_to_ms(at)


def test_a_kept_instant_is_looked_up_not_converted_and_a_naive_one_fails_every_time() -> None:
    at = datetime(2026, 12, 5, 9, 0, 0, 250_000, tzinfo=UTC)
    due_ms(at)
    assert item._DUE_MS[at.astimezone(timezone.min)] == datetime_to_ms(at)
    for _ in range(2):
        with pytest.raises(ValueError, match="naive"):
            due_ms(at.replace(tzinfo=None))


def test_what_is_kept_stays_bounded() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(DUE_KEPT + 50):
        assert due_ms(start + timedelta(milliseconds=i)) == datetime_to_ms(start) + i
        assert len(item._DUE_MS) <= DUE_KEPT
