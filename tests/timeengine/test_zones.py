"""The transition finder against a brute-force hourly-and-bisect-free scan."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kadence.timeengine.zones import (
    load_zone,
    next_transition,
    offset_s,
    tzdb_version,
    year_transitions,
)

from .test_oracle import ZONES


@pytest.mark.parametrize("name", ZONES)
def test_transitions_match_a_brute_force_scan(name: str) -> None:
    zone = load_zone(name)
    for year in (1995, 2011, 2026):
        # transitions fall on a quarter hour (UTC), so a 15-minute scan sees each at its exact
        # instant; St John's changed clocks at 00:01 local until 2011, so it is scanned by minute
        found = {(t.at_s, t.before_s, t.after_s) for t in year_transitions(zone, year)}
        start = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
        end = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
        brute = set()
        step = 60 if name == "America/St_Johns" else 900
        prev = offset_s(zone, start - step)
        for t in range(start, end, step):
            off = offset_s(zone, t)
            if off != prev:
                brute.add((t, prev, off))
            prev = off
        assert found == brute, (name, year)


def test_next_transition_crosses_years_and_respects_the_horizon() -> None:
    ny = load_zone("America/New_York")
    dec = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp())
    tr = next_transition(ny, dec, 200 * 86_400)
    assert tr is not None
    assert datetime.fromtimestamp(tr.at_s, UTC) == datetime(2027, 3, 14, 7, tzinfo=UTC)
    assert tr.is_gap and tr.size_s == 3600
    assert next_transition(ny, dec, 30 * 86_400) is None
    assert next_transition(load_zone("Asia/Kolkata"), dec, 5 * 366 * 86_400) is None


def test_tzdb_version_is_reported() -> None:
    version = tzdb_version()
    assert len(version) >= 5 and version[:4].isdigit()
