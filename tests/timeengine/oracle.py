"""A brute-force oracle for the time engine, written independently of it.

It walks UTC time step by step through the tz database, reads the local wall clock, matches cron
fields with its own simple matcher (no croniter), notices spring-forward gaps as the wall clock
jumping ahead and repeated hours as wall times seen twice, and applies the DST policies as the
docs state them. Slow and obviously right, which is the point.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

NAIVE_EPOCH = datetime(1970, 1, 1)


@functools.lru_cache(maxsize=4096)
def _values(field: str, lo: int, hi: int) -> frozenset[int]:
    out: set[int] = set()
    for item in field.split(","):
        part, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if part == "*":
            a, b = lo, hi
        elif "-" in part:
            a_text, b_text = part.split("-")
            a, b = int(a_text), int(b_text)
        else:
            a = b = int(part)
            if step != 1:
                b = hi
        out.update(range(a, b + 1, step))
    return frozenset(out)


@functools.lru_cache(maxsize=4096)
def _month_days(dom: str, year: int, month: int) -> frozenset[int]:
    """Day-of-month values in one month: Quartz's `LW` (the last Monday-to-Friday) and `L-n`
    (n days before the last) counted back from the month's length, the rest as numbers."""
    length = (date(year + month // 12, month % 12 + 1, 1) - timedelta(days=1)).day
    plain = [p for p in dom.split(",") if not p.startswith("L")]
    out = set(_values(",".join(plain), 1, 31)) if plain else set()
    for part in dom.split(","):
        if part == "LW":
            day = length
            while date(year, month, day).weekday() >= 5:
                day -= 1
            out.add(day)
        elif part.startswith("L-") and length - int(part[2:]) >= 1:
            out.add(length - int(part[2:]))
    return frozenset(out)


@dataclass(frozen=True)
class Fields:
    """Plain cron fields; `second` is None for 5-field expressions."""

    minute: str
    hour: str
    dom: str
    month: str
    dow: str
    second: str | None = None

    @property
    def expression(self) -> str:
        parts = [self.minute, self.hour, self.dom, self.month, self.dow]
        return " ".join([self.second, *parts] if self.second is not None else parts)

    def matches(self, w: datetime) -> bool:
        if self.second is not None and w.second not in _values(self.second, 0, 59):
            return False
        if self.second is None and w.second != 0:
            return False
        if w.minute not in _values(self.minute, 0, 59) or w.hour not in _values(self.hour, 0, 23):
            return False
        if w.month not in _values(self.month, 1, 12):
            return False
        dom_ok = w.day in _month_days(self.dom, w.year, w.month)
        dows = {d % 7 for d in _values(self.dow, 0, 7)}
        dow_ok = (w.weekday() + 1) % 7 in dows
        if self.dom.startswith("*") or self.dow.startswith("*"):
            return dom_ok and dow_ok
        return dom_ok or dow_ok  # Vixie cron: both restricted (no leading *) -> either


def wall_of(zone: tzinfo, at_s: int) -> datetime:
    return datetime.fromtimestamp(at_s, tz=zone).replace(tzinfo=None)


def oracle(
    fields: Fields,
    zone: tzinfo,
    start_s: int,
    end_s: int,
    gap: str,
    fold: str,
    *,
    margin_s: int = 6 * 3600,
) -> tuple[list[int], list[datetime]]:
    """Occurrence instants (epoch s) in (start_s, end_s], and wall times skipped by gap=skip."""
    step = 1 if fields.second is not None else 60
    one = timedelta(seconds=step)
    u = (start_s - margin_s) // step * step
    prev = wall_of(zone, u - step)
    events: list[tuple[int, datetime, bool]] = []  # (instant, wall, in_gap)
    while u <= end_s + margin_s:
        w = wall_of(zone, u)
        if w - prev > one:  # the wall clock jumped ahead: everything between never existed
            x = prev + one
            while x < w:
                if fields.matches(x):
                    events.append((u, x, True))
                x += one
        if fields.matches(w):
            events.append((u, w, False))
        prev = w
        u += step
    seen_count = Counter(w for _, w, in_gap in events if not in_gap)
    wildcard_hour = "*" in fields.hour or "/" in fields.hour
    seen: set[datetime] = set()
    fired: set[int] = set()
    skipped: list[datetime] = []
    for at, w, in_gap in events:
        if in_gap:
            if gap == "shift":
                fired.add(at)
            elif start_s < at <= end_s:
                skipped.append(w)
            continue
        if seen_count[w] > 1:
            first = w not in seen
            seen.add(w)
            keep = {
                "both": True,
                "first": first,
                "last": not first,
                "auto": True if wildcard_hour else first,
            }[fold]
            if not keep:
                continue
        fired.add(at)
    return sorted(t for t in fired if start_s < t <= end_s), skipped
