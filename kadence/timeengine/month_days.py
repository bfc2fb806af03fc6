"""Quartz's `LW` and `L-n` in day-of-month, which croniter cannot evaluate.

Each names one day that depends on the month: `LW` its last weekday (Monday to Friday), `L-n`
the day n before its last (`L-0` is `L`; none in a month shorter than n + 1 days). The matcher
resolves them for one month at a time into day numbers, and croniter matches the expression
with those numbers in their place.
"""

from __future__ import annotations

import calendar
import re

from kadence.errors import InvalidScheduleError

MONTH_DAY = re.compile(r"^l(?:w|-(\d+))$")
"""`lw` or `l-n` (lowercased): a day-of-month part that depends on the month."""
MAX_BEFORE_LAST = 30
"""`L-30` is the first of a 31-day month; more names no day of any month."""
FIELD = "schedule.expression"


def check(part: str, expression: str) -> None:
    """Refuse an `L-n` whose n names no day of any month."""
    m = MONTH_DAY.match(part)
    if m and m.group(1) is not None and int(m.group(1)) > MAX_BEFORE_LAST:
        why = f"`{part.upper()}`: n in `L-n` must be 0 to {MAX_BEFORE_LAST} (days before the last)"
        raise InvalidScheduleError(f"cron expression {expression!r}: {why}", [f"{FIELD}: {why}"])


def has_month_days(dom: str) -> bool:
    return any(MONTH_DAY.match(part) for part in dom.split(","))


def days_of(part: str, year: int, month: int) -> int | None:
    """The day of (year, month) that `lw` or `l-n` names, or None when it names none."""
    last = calendar.monthrange(year, month)[1]
    m = MONTH_DAY.match(part)
    assert m is not None, part
    if m.group(1) is not None:
        day = last - int(m.group(1))
        return day if day >= 1 else None
    day = last
    while calendar.weekday(year, month, day) >= calendar.SATURDAY:
        day -= 1
    return day


def resolve(normalized: str, day_or: bool, year: int, month: int) -> str | None:
    """`normalized` with its `LW`/`L-n` parts replaced by the days they name in (year, month),
    as croniter reads it; None when no day of that month can match. With day-of-week restricted
    too (day_or), a month where day-of-month names no day matches on day-of-week alone: `*`
    makes croniter read it so."""
    fields = normalized.split(" ")
    parts = fields[-3].split(",")
    days = [p for p in parts if not MONTH_DAY.match(p)]
    for part in parts:
        if MONTH_DAY.match(part) and (day := days_of(part, year, month)) is not None:
            days.append(str(day))
    if not days:
        if not day_or:
            return None
        days = ["*"]
    fields[-3] = ",".join(dict.fromkeys(days))
    return " ".join(fields)
