"""Time zones: loading IANA zones by name, the tz database version, and UTC-offset transitions.

`zoneinfo` answers "what is the offset at instant t" but not "when does it next change". The
engine needs the latter to walk local time segment by segment, so transitions are found by
probing each hour of a year and bisecting to the second, cached per (zone, year). Two offset
changes less than an hour apart would be missed; no zone in the tz database has had one.
"""

from __future__ import annotations

import functools
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from kadence.errors import InvalidScheduleError

HOUR_S = 3600
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Transition:
    """The zone's UTC offset changes at `at_s` (UTC epoch seconds) from `before_s` to `after_s`."""

    at_s: int
    before_s: int
    after_s: int

    @property
    def is_gap(self) -> bool:
        """Clocks jump forward: local times in [at+before, at+after) do not exist."""
        return self.after_s > self.before_s

    @property
    def size_s(self) -> int:
        return abs(self.after_s - self.before_s)


def load_zone(name: str, field: str = "schedule.timezone") -> tzinfo:
    """The IANA zone called `name`, or an InvalidScheduleError naming `field`."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidScheduleError(
            f"unknown time zone {name!r}",
            [f"{field}: unknown IANA time zone {name!r} (e.g. Europe/London, America/New_York)"],
        ) from None


def tzdb_version() -> str:
    """Version of the tz database zoneinfo loads zones from (system first, then `tzdata`)."""
    for root in zoneinfo.TZPATH:
        zi = Path(root) / "tzdata.zi"
        if zi.exists():
            with zi.open() as f:
                first = f.readline().strip()
            if first.startswith("# version"):
                return first.split()[-1]
    try:
        import tzdata  # type: ignore[import-untyped]  # noqa: PLC0415

        return str(tzdata.IANA_VERSION)
    except ImportError:  # pragma: no cover - tzdata is a dependency
        return "unknown"


def offset_s(zone: tzinfo, at_s: int) -> int:
    """UTC offset in seconds in effect at the instant `at_s` (epoch seconds)."""
    off = datetime.fromtimestamp(at_s, tz=zone).utcoffset()
    return int(off.total_seconds()) if off is not None else 0


@functools.lru_cache(maxsize=4096)
def year_transitions(zone: tzinfo, year: int) -> tuple[Transition, ...]:
    """Every offset change at an instant in UTC calendar year `year`, in order."""
    start = int((datetime(year, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds())
    end = int((datetime(year + 1, 1, 1, tzinfo=UTC) - _EPOCH).total_seconds())
    probes = [*range(start - 1, end - 1, HOUR_S), end - 1]
    out = []
    prev_t, prev_off = probes[0], offset_s(zone, probes[0])
    for t in probes[1:]:
        off = offset_s(zone, t)
        if off != prev_off:
            lo, hi = prev_t, t  # offset(lo) == prev_off != offset(hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if offset_s(zone, mid) == prev_off:
                    lo = mid
                else:
                    hi = mid
            out.append(Transition(hi, prev_off, offset_s(zone, hi)))
            prev_off = off
        prev_t = t
    return tuple(out)


def _year_of(at_s: int) -> int:
    return datetime.fromtimestamp(at_s, tz=UTC).year


def next_transition(zone: tzinfo, after_s: int, horizon_s: int) -> Transition | None:
    """The first transition strictly after `after_s`, looking at most `horizon_s` ahead."""
    year = _year_of(after_s)
    last_year = _year_of(after_s + horizon_s)
    while year <= last_year:
        for tr in year_transitions(zone, year):
            if tr.at_s > after_s:
                return tr if tr.at_s <= after_s + horizon_s else None
        year += 1
    return None
