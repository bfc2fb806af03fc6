"""Cron expressions: parsing, normalising and matching in *local wall-clock* time.

Accepted: 5 fields (minute hour day-of-month month day-of-week); 6 fields with seconds *first*
(as Quartz and Spring write it); macros (@yearly, @annually, @monthly, @weekly, @daily,
@midnight, @hourly); `L` (last day of month), `LW` (its last weekday, Monday to Friday), `L-n`
(n days before the last day) and `nW` (nearest weekday) in day-of-month; `d#n` (n-th weekday)
and `Ld` or `dL` (last weekday d of the month) in day-of-week; Jenkins-style `H`
hashed fields, hashed from the job key so they are stable per job. Day-of-month and day-of-week
combine with OR when both are restricted, as in Vixie cron, where a field that starts with `*`
(`*`, `*/2`) is unrestricted: `0 0 */2 * 1` means odd days that are Mondays, and
`0 0 1,15 * 1` means the 1st, the 15th and every Monday.

croniter does the matching on naive local times; the engine (engine.py) owns the conversion
to UTC and the DST policy. `LW` and `L-n`, which croniter cannot evaluate, are resolved month by
month into the day numbers they name there, and croniter matches the rest (month_days.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from kadence.errors import InvalidScheduleError
from kadence.timeengine import month_days

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELD = "schedule.expression"
SEARCH_YEARS = 28
"""A spec with no match in 28 years never matches: a date and a weekday meet again within that
(`* * */7 1 0`, the 1st of January a Sunday: 2023, then 2034; Feb 29 alone needs up to 8). It
was 9, which refused such a spec as never matching (found by the oracle property test)."""
LAST_YEAR = 9990
"""The calendar ends at 9999: no search walks past this year."""
_QUARTZ_LAST_DOW = re.compile(r"^([0-7]|sun|mon|tue|wed|thu|fri|sat)l$")
_SINGLE_RANGE = re.compile(r"^(\w+)-\1(/\d+)?$")
"""`5-5`: croniter 7 expands a one-value range to `*` (every value); we rewrite it to `5`."""


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A validated cron expression, normalised for croniter."""

    expression: str
    """As the user wrote it."""
    normalized: str
    """What croniter evaluates: macros expanded, seconds first, `5L` written `L5`."""
    has_seconds: bool
    hash_id: bytes | None
    """The job key for H fields, or None when the expression has none."""
    day_or: bool = True
    """Both day fields restricted: a day matches either (Vixie cron)."""
    hour_is_wildcard_or_step: bool = False
    """The hour field, as written, has `*` or `/`; decides the `auto` fold policy: such jobs
    fire in both copies of a repeated hour."""
    month_days: bool = False
    """Day-of-month has `LW` or `L-n`: resolved month by month (month_days.py)."""

    def next_local(self, after: datetime) -> datetime | None:
        """First matching local wall time strictly after `after` (naive), within the horizon."""
        return _next_local(self, after.replace(microsecond=0))

    def matches(self, local: datetime) -> bool:
        normalized = self.normalized
        if self.month_days:
            resolved = month_days.resolve(normalized, self.day_or, local.year, local.month)
            if resolved is None:
                return False
            normalized = resolved
        return bool(
            croniter.match(
                normalized, local, day_or=self.day_or, second_at_beginning=self.has_seconds
            )
        )


def _normalize(expression: str) -> tuple[str, bool, bool]:
    """(croniter form, has a seconds field, hour field as written is a wildcard or step)."""
    text = " ".join(expression.strip().lower().split())
    if text.startswith("@"):
        if text not in MACROS:
            known = ", ".join(sorted(MACROS))
            raise InvalidScheduleError(
                f"unknown cron macro {expression!r}",
                [f"{FIELD}: unknown macro {expression!r} (known: {known})"],
            )
        text = MACROS[text]
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise InvalidScheduleError(
            f"cron expression {expression!r} has {len(fields)} fields",
            [
                f"{FIELD}: expected 5 fields (minute hour day-of-month month day-of-week) or 6 "
                f"with seconds first, got {len(fields)} in {expression!r}"
            ],
        )
    for part in fields[-3].split(","):
        month_days.check(part, expression)
    hour = fields[2] if len(fields) == 6 else fields[1]
    fields = [
        ",".join(
            m.group(1) if (m := _SINGLE_RANGE.match(part)) else part for part in field.split(",")
        )
        for field in fields
    ]
    fields[-1] = ",".join(
        f"l{m.group(1)}" if (m := _QUARTZ_LAST_DOW.match(part)) else part
        for part in fields[-1].split(",")
    )
    return " ".join(fields), len(fields) == 6, "*" in hour or "/" in hour


def parse_cron(expression: str, job_key: str | None = None) -> CronSpec:
    """Validate `expression`; raise InvalidScheduleError naming schedule.expression if bad.

    Cached: a million jobs sharing an expression are parsed and checked once (H fields make
    the spec per job, so only they include the job key in the cache key).
    """
    if not expression or not expression.strip():
        raise InvalidScheduleError("empty cron expression", [f"{FIELD}: must not be empty"])
    return _parse(expression, (job_key or "no-job-key") if _uses_hash(expression) else None)


@functools.lru_cache(maxsize=65_536)
def _uses_hash(expression: str) -> bool:
    """Whether a field of `expression` is hashed (H); a malformed one raises, uncached."""
    normalized, _, _ = _normalize(expression)
    return any(part.startswith("h") for field in normalized.split(" ") for part in field.split(","))


@functools.lru_cache(maxsize=65_536)
def _parse(expression: str, hash_key: str | None) -> CronSpec:
    normalized, has_seconds, hour_wild = _normalize(expression)
    hash_id = hash_key.encode() if hash_key is not None else None
    day_fields = normalized.split(" ")[-3::2]  # day-of-month, day-of-week
    day_or = not any(f.startswith("*") for f in day_fields)
    dynamic = month_days.has_month_days(normalized.split(" ")[-3])
    spec = CronSpec(expression, normalized, has_seconds, hash_id, day_or, hour_wild, dynamic)
    try:
        _compile(spec)
    except (CroniterError, ValueError, KeyError, IndexError) as exc:
        raise InvalidScheduleError(
            f"malformed cron expression {expression!r}: {exc}",
            [f"{FIELD}: malformed cron expression {expression!r} ({exc})"],
        ) from None
    if spec.next_local(datetime(2024, 1, 1)) is None:
        raise InvalidScheduleError(
            f"cron expression {expression!r} never matches",
            [f"{FIELD}: {expression!r} never matches a real date (e.g. 30 Feb or 31 Apr)"],
        )
    return spec


def _compile(spec: CronSpec) -> croniter:
    normalized = spec.normalized
    if spec.month_days:  # checks the rest of the expression; the month's days are checked above
        normalized = month_days.resolve(normalized, True, 2024, 1) or normalized
    return croniter(
        normalized,
        datetime(2024, 1, 1),
        hash_id=spec.hash_id,
        day_or=spec.day_or,
        second_at_beginning=spec.has_seconds,
    )


@functools.lru_cache(maxsize=65_536)
def _next_local(spec: CronSpec, after: datetime) -> datetime | None:
    """Cached per (spec, instant): a burst of jobs sharing an expression walks croniter once."""
    if spec.month_days:
        return _next_by_month(spec, after)
    return _first_after(spec, spec.normalized, after, SEARCH_YEARS)


def _first_after(spec: CronSpec, normalized: str, after: datetime, years: int) -> datetime | None:
    it = croniter(
        normalized,
        after,
        hash_id=spec.hash_id,
        day_or=spec.day_or,
        second_at_beginning=spec.has_seconds,
        max_years_between_matches=years,
    )
    try:
        found: datetime = it.get_next(datetime)
    except (CroniterBadDateError, CroniterBadCronError):
        return None
    if found - after > timedelta(days=366 * years):
        return None
    return found


def _next_by_month(spec: CronSpec, after: datetime) -> datetime | None:
    """`LW`/`L-n`: the first match after `after` in its month, else in the next month, ...,
    for SEARCH_YEARS years; each month with the days it names resolved for croniter."""
    year, month, start = after.year, after.month, after
    for _ in range(12 * SEARCH_YEARS + 1):
        normalized = month_days.resolve(spec.normalized, spec.day_or, year, month)
        if normalized is not None:
            found = _first_after(spec, normalized, start, 1)
            if found is not None and (found.year, found.month) == (year, month):
                return found
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        if year > LAST_YEAR:
            return None
        start = datetime(year, month, 1) - timedelta(seconds=1)
    return None
