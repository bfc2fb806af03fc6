"""`JobState.evolve`: a copy with some fields changed, by one `__dict__` copy (no slots)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.scheduler.state import JobState

BASE = JobState(
    definition_bytes=b"d",
    cursor_ms=1,
    created_cursor_ms=1,
    next_nominal_ms=2,
    next_due_ms=2,
    tzdb="2025b",
    request_ids=("r1",),
)


@given(
    cursor=st.integers(0, 2**62),
    fired=st.integers(0, 10**9),
    paused=st.booleans(),
    ids=st.lists(st.text(max_size=8), max_size=3).map(tuple),
)
def test_evolve_changes_only_what_it_is_given(
    cursor: int, fired: int, paused: bool, ids: tuple[str, ...]
) -> None:
    new = BASE.evolve(cursor_ms=cursor, fired=fired, paused=paused, request_ids=ids)
    changed = {"cursor_ms": cursor, "fired": fired, "paused": paused, "request_ids": ids}
    for f in fields(JobState):
        want = changed.get(f.name, getattr(BASE, f.name))
        assert getattr(new, f.name) == want, f.name
    assert (BASE.cursor_ms, BASE.fired, BASE.request_ids) == (1, 0, ("r1",))  # untouched
    assert new == JobState(**{f.name: getattr(new, f.name) for f in fields(JobState)})


def test_evolve_refuses_a_field_it_does_not_have_and_stays_frozen() -> None:
    with pytest.raises(TypeError, match="no field"):
        BASE.evolve(cursor=5)
    new = BASE.evolve(fired=3)
    with pytest.raises(FrozenInstanceError):
        new.fired = 4  # type: ignore[misc]


def test_a_new_definition_drops_the_decoded_caches() -> None:
    stored = BASE.evolve(_definition_stored=True)
    assert stored.evolve(fired=1).definition_stored
    assert not stored.evolve(definition_bytes=b"e").definition_stored
