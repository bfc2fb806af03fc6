"""Exclusions: occurrences a schedule names that do not run, decided on their local time.

A date range excludes whole local days; a 5-field cron expression excludes the minutes it
names. The search skips an excluded stretch at once instead of one occurrence at a time: a
per-second job excluded for a week is one step, not 604 800. The jump never passes an
occurrence that is not excluded: it goes to the first instant the stretch's end could have,
and stops at a clock change that would take the local time back before the stretch began.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

from croniter import CroniterError, croniter

from kadence.errors import InvalidScheduleError
from kadence.models import ExcludeCron, ExcludeDates
from kadence.timeengine.cron import CronSpec, parse_cron
from kadence.timeengine.zones import next_transition

_NAIVE_EPOCH = datetime(1970, 1, 1)
_LAST = datetime(9999, 12, 31)
DAY, HOUR, MINUTE = timedelta(days=1), timedelta(hours=1), timedelta(minutes=1)
MAX_EXTEND = 200
"""Stretches one jump runs on through at most (the engine makes up to MAX_EXCLUDED_STEPS
jumps in one search): the work an exclusion can ask of a search is bounded."""


@dataclass(frozen=True, slots=True)
class MinuteSet:
    """A plain 5-field expression (numbers, ranges, steps, lists, names) as sets of values,
    matched in a couple of microseconds where croniter takes a hundred; forms with `L`, `W`,
    `#` or `H` go to croniter (`spec`)."""

    spec: CronSpec
    fields: tuple[frozenset[int] | None, ...] | None
    """minute, hour, day of month, month, day of week (0 Sunday); None: any value."""

    def matches(self, minute: datetime) -> bool:
        if self.fields is None:
            return self.spec.matches(minute)
        m, h, dom, mon, dow = self.fields
        if (m is not None and minute.minute not in m) or (h is not None and minute.hour not in h):
            return False
        if mon is not None and minute.month not in mon:
            return False
        day = dom is None or minute.day in dom
        week = dow is None or (minute.weekday() + 1) % 7 in dow
        if dom is not None and dow is not None and self.spec.day_or:
            return day or week
        return day and week


def minute_set(spec: CronSpec) -> MinuteSet:
    try:
        expanded, nth = croniter.expand(spec.normalized)
    except (CroniterError, ValueError):
        return MinuteSet(spec, None)
    fields: list[frozenset[int] | None] = []
    for values in expanded:
        if values == ["*"]:
            fields.append(None)
        else:
            numbers = [v for v in values if isinstance(v, int)]
            if len(numbers) != len(values):  # `l`, `w`: croniter's own matching
                return MinuteSet(spec, None)
            fields.append(frozenset(v % 7 if len(fields) == 4 else v for v in numbers))
    return MinuteSet(spec, None if nth or spec.hash_id else tuple(fields))


@dataclass(frozen=True, slots=True)
class Exclusions:
    zone: tzinfo
    dates: tuple[tuple[date, date], ...]
    crons: tuple[tuple[MinuteSet, timedelta], ...]
    """Each expression, and the stretch one match of it covers: a day when its minute and hour
    fields are `*`, an hour when its minute field is, else a minute."""

    def stretch(self, wall: datetime) -> tuple[datetime, datetime] | None:
        """The excluded stretch of local time holding `wall` ([start, end)), or None."""
        day = wall.date()
        for first, last in self.dates:
            if first <= day <= last:
                start = datetime.combine(first, datetime.min.time())
                return start, min(datetime.combine(last, datetime.min.time()) + DAY, _LAST)
        minute = wall.replace(second=0, microsecond=0)
        for spec, unit in self.crons:
            if spec.matches(minute):
                if unit == DAY:
                    start = minute.replace(hour=0, minute=0)
                elif unit == HOUR:
                    start = minute.replace(minute=0)
                else:
                    start = minute
                return start, min(start + unit, _LAST)
        return None

    def covering(self, wall: datetime) -> tuple[datetime, datetime] | None:
        """The stretch holding `wall`, run on through the stretches that follow it without a
        gap (minutes 0-58 of an hour are one stretch, a weekend and the holiday after it
        another), up to MAX_EXTEND of them; None when `wall` is not excluded."""
        found = self.stretch(wall)
        if found is None:
            return None
        start, end = found
        for _ in range(MAX_EXTEND):
            following = self.stretch(end) if end < _LAST else None
            if following is None:
                break
            end = following[1]
        return start, end

    def jump_ms(self, nominal_ms: int, stretch: tuple[datetime, datetime]) -> int:
        """A cursor past the occurrence at `nominal_ms` and every excluded one after it in its
        stretch: the next search starts there. Never past an occurrence that is not excluded."""
        start, end = stretch
        target_s = min(_instant(self.zone, end, 0), _instant(self.zone, end, 1))
        at_s = nominal_ms // 1000
        while target_s > at_s and (tr := next_transition(self.zone, at_s, target_s - at_s)):
            if tr.at_s >= target_s:
                break
            if not tr.is_gap and _wall(tr.at_s + tr.after_s) < start:
                target_s = tr.at_s  # the clock goes back to before the stretch: stop there
                break
            at_s = tr.at_s
        return max(nominal_ms, target_s * 1000 - 1)


def _instant(zone: tzinfo, wall: datetime, fold: int) -> int:
    return int(wall.replace(tzinfo=zone, fold=fold).timestamp())


def _wall(local_s: int) -> datetime:
    return _NAIVE_EPOCH + timedelta(seconds=local_s)


def compile_exclusions(
    exclude: list[ExcludeDates | ExcludeCron], zone: tzinfo, job_key: str
) -> Exclusions | None:
    """Validate and compile `exclude` (None when empty); InvalidScheduleError names each bad
    entry `schedule.exclude[i]`."""
    if not exclude:
        return None
    errors: list[str] = []
    dates: list[tuple[date, date]] = []
    crons: list[tuple[MinuteSet, timedelta]] = []
    for i, entry in enumerate(exclude):
        field = f"schedule.exclude[{i}]"
        if isinstance(entry, ExcludeDates):
            first = date.fromisoformat(entry.start)
            dates.append((first, date.fromisoformat(entry.end) if entry.end else first))
            continue
        try:
            spec = parse_cron(entry.expression, job_key)
        except InvalidScheduleError as exc:
            errors.extend(
                e.replace("schedule.expression", f"{field}.expression") for e in exc.errors
            )
            continue
        if spec.has_seconds:
            errors.append(f"{field}.expression: 5 fields (an exclusion names minutes), got 6")
            continue
        minute, hour = spec.normalized.split(" ")[:2]
        unit = DAY if (minute, hour) == ("*", "*") else HOUR if minute == "*" else MINUTE
        crons.append((minute_set(spec), unit))
    if errors:
        raise InvalidScheduleError("invalid schedule: " + "; ".join(errors), errors)
    return Exclusions(zone, tuple(dates), tuple(crons))
