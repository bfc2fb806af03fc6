"""From a ScheduleDefinition's schedule to a CompiledSchedule, validating everything on the way.

Every problem is reported at once, each naming its field: an unknown zone, a malformed or
never-matching expression, bounds with no occurrence between them, a spread wider than the
schedule's shortest interval.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, tzinfo

from kadence.clock import datetime_to_ms, ms_to_datetime
from kadence.errors import InvalidScheduleError
from kadence.models import CronSchedule, IntervalSchedule, OnceSchedule
from kadence.models.base import EARLIEST, LATEST
from kadence.timeengine.cron import FIELD, CronSpec, parse_cron
from kadence.timeengine.engine import (
    HORIZON_S,
    CompiledSchedule,
    CronRule,
    IntervalRule,
    ScheduleSearchError,
)
from kadence.timeengine.exclusions import compile_exclusions
from kadence.timeengine.spread import spread_offset_ms
from kadence.timeengine.zones import load_zone, offset_s, year_transitions

ZoneProvider = Callable[[str], tzinfo]
AUTO_SPREAD_S = 60
"""The default spread of an expression without a seconds field: the minute it names."""
SPREAD_PROBE = 100
MINUTE_S = 60
_SPREAD_REFERENCE_MS = datetime_to_ms(datetime(2024, 1, 1, tzinfo=UTC))
_EARLIEST, _LATEST = EARLIEST, LATEST
"""The models' own bounds (`UtcDatetime`); checked again for schedules built without them."""
"""Bounds a cron schedule's start_at and end_at must keep to: the engine looks a year and more
around them, and Python's calendar ends at year 9999."""


def compile_schedule(
    schedule: CronSchedule | OnceSchedule | IntervalSchedule,
    job_key: str,
    zones: ZoneProvider = load_zone,
) -> CompiledSchedule:
    """Validate and compile; raises InvalidScheduleError listing every bad field."""
    if isinstance(schedule, OnceSchedule):
        return CompiledSchedule(job_key, UTC, None, once_ms=datetime_to_ms(schedule.run_at))
    if isinstance(schedule, IntervalSchedule):
        return _compile_interval(schedule, job_key, zones)
    errors: list[str] = []
    zone: tzinfo | None = None
    try:
        zone = zones(schedule.timezone)
    except InvalidScheduleError as exc:
        errors.extend(exc.errors)
    cron, also = _expressions(schedule, job_key, errors)
    errors.extend(_bound_errors(schedule))
    if errors or zone is None or cron is None:
        raise InvalidScheduleError("invalid schedule: " + "; ".join(errors), errors)
    start_ms = datetime_to_ms(schedule.start_at) if schedule.start_at else None
    end_ms = datetime_to_ms(schedule.end_at) if schedule.end_at else None
    rule = _rule(cron, zone, schedule.dst_gap, schedule.dst_fold, start_ms, end_ms)
    more = tuple(
        _rule(c, zone, schedule.dst_gap, schedule.dst_fold, start_ms, end_ms) for c in also
    )
    spread_s = spread_window_s(schedule, cron, also)
    spread_ms = spread_offset_ms(job_key, spread_s)
    compiled = CompiledSchedule(job_key, zone, rule, spread_ms=spread_ms, more=more)
    if end_ms is not None:
        origin = start_ms if start_ms is not None else end_ms - HORIZON_S * 1000
        if compiled.next_after(origin - 1) is None:
            errors.append("schedule.end_at: no occurrence between start_at and end_at")
    if spread_s and not errors:
        problems = _spread_problems(compiled, spread_s, start_ms)
        if problems and schedule.spread_s is None:  # the default never refuses: exact instead
            compiled = CompiledSchedule(job_key, zone, rule, more=more)
        else:
            errors.extend(problems)
    if errors:
        raise InvalidScheduleError("invalid schedule: " + "; ".join(errors), errors)
    return _excluding(compiled, schedule, start_ms)


EXCLUSION_PROBE_FROM = datetime_to_ms(datetime(2024, 1, 1, tzinfo=UTC))


def _excluding(
    compiled: CompiledSchedule, schedule: CronSchedule | IntervalSchedule, start_ms: int | None
) -> CompiledSchedule:
    """`compiled` with the schedule's exclusions; refused when they leave no occurrence."""
    exclusions = compile_exclusions(schedule.exclude, compiled.zone, compiled.job_key)
    if exclusions is None:
        return compiled
    compiled = replace(compiled, exclusions=exclusions)
    end_ms = datetime_to_ms(schedule.end_at) if schedule.end_at else None
    if start_ms is not None:
        origin = start_ms - 1
    elif end_ms is not None:
        origin = min(EXCLUSION_PROBE_FROM, end_ms - HORIZON_S * 1000)
    else:
        origin = EXCLUSION_PROBE_FROM
    try:
        left = compiled.next_after(origin)
    except ScheduleSearchError:
        left = None
    if left is None:
        why = "schedule.exclude: the exclusions leave no occurrence to run"
        raise InvalidScheduleError(f"invalid schedule: {why}", [why])
    return compiled


def _expressions(
    schedule: CronSchedule, job_key: str, errors: list[str]
) -> tuple[CronSpec | None, list[CronSpec]]:
    """The expression and the `also` ones parsed; what is wrong with each added to `errors`."""
    cron: CronSpec | None = None
    try:
        cron = parse_cron(schedule.expression, job_key)
    except InvalidScheduleError as exc:
        errors.extend(exc.errors)
    also: list[CronSpec] = []
    for i, text in enumerate(schedule.also):
        try:
            also.append(parse_cron(text, job_key))
        except InvalidScheduleError as exc:
            errors.extend(e.replace(FIELD, f"schedule.also[{i}]", 1) for e in exc.errors)
    return cron, also


def _compile_interval(
    schedule: IntervalSchedule, job_key: str, zones: ZoneProvider
) -> CompiledSchedule:
    errors = list(_bound_errors(schedule))
    zone: tzinfo = UTC
    try:
        zone = zones(schedule.timezone)
    except InvalidScheduleError as exc:
        errors.extend(exc.errors)
    start_ms = datetime_to_ms(schedule.start_at) if schedule.start_at else None
    end_ms = datetime_to_ms(schedule.end_at) if schedule.end_at else None
    rule = IntervalRule(schedule.every_s * 1000, schedule.offset_s * 1000, start_ms, end_ms)
    if not errors and end_ms is not None:
        first = rule.next_after((start_ms if start_ms is not None else end_ms) - 1)
        if first is None and start_ms is not None:
            errors.append("schedule.end_at: no occurrence between start_at and end_at")
    if errors:
        raise InvalidScheduleError("invalid schedule: " + "; ".join(errors), errors)
    spread_ms = spread_offset_ms(job_key, schedule.spread_s)
    compiled = CompiledSchedule(job_key, zone, None, spread_ms=spread_ms, interval=rule)
    return _excluding(compiled, schedule, start_ms)


_rule = functools.lru_cache(maxsize=65_536)(CronRule)
"""Jobs with equal rules share one (its hash is computed once, and so are the searches the
engine caches by rule): a million jobs on a thousand expressions build a thousand rules."""


def _bound_errors(schedule: CronSchedule | IntervalSchedule) -> list[str]:
    """start_at and end_at inside the calendar the engine walks (outside, it would fail with a
    ValueError past year 9999), and in order."""
    errors = [
        f"schedule.{name}: must be from 1900-01-01 and before 9000-01-01"
        for name, at in (("start_at", schedule.start_at), ("end_at", schedule.end_at))
        if at is not None and not _EARLIEST <= at < _LATEST
    ]
    if schedule.start_at and schedule.end_at and schedule.end_at <= schedule.start_at:
        errors.append("schedule.end_at: must be after start_at")
    return errors


def spread_window_s(schedule: CronSchedule, cron: CronSpec, also: list[CronSpec]) -> int:
    """The spread a schedule asked for, or by default the resolution of its expression: a
    5-field expression names a minute, so any second of it is on time; one with a seconds
    field names the second."""
    if schedule.spread_s is not None:
        return schedule.spread_s
    return 0 if cron.has_seconds or any(c.has_seconds for c in also) else AUTO_SPREAD_S


def _spread_problems(compiled: CompiledSchedule, spread_s: int, start_ms: int | None) -> list[str]:
    """Spread must stay shorter than the gap between occurrences, or they would reorder."""
    rule = compiled.rule
    assert rule is not None
    from_ms = start_ms or _SPREAD_REFERENCE_MS
    seconds = any(r.cron.has_seconds for r in (rule, *compiled.more))
    if spread_s <= MINUTE_S and not seconds and whole_minutes(rule.zone, from_ms):
        # every occurrence is a whole UTC minute (a local minute, or a shift to a transition
        # instant), and they are distinct: at least a minute apart, so a spread within the
        # minute always fits. What the default spread of every 5-field job asks, answered
        # without walking a hundred occurrences (15 ms for a rule no other job shares).
        return []
    gap = shortest_gap_ms(rule, from_ms) if not compiled.more else _union_gap(compiled, from_ms)
    if gap is not None and spread_s * 1000 > gap:  # offsets stay below spread_s * 1000
        return [
            f"schedule.spread_s: {spread_s} s must not exceed the schedule's shortest "
            f"interval ({gap // 1000} s)"
        ]
    return []


def _union_gap(compiled: CompiledSchedule, from_ms: int) -> int | None:
    """The shortest interval between the first SPREAD_PROBE occurrences of a job with more
    than one expression (per job: the union is not shared the way one rule is)."""
    occs = replace(compiled, spread_ms=0).upcoming(from_ms, SPREAD_PROBE)
    gaps = [b.nominal_ms - a.nominal_ms for a, b in itertools.pairwise(occs)]
    return min(gaps) if gaps else None


@functools.lru_cache(maxsize=4_096)
def whole_minutes(zone: tzinfo, from_ms: int) -> bool:
    """Whether `zone`'s offset at `from_ms`, and its offsets and transition instants in that
    year and the next, are whole minutes (true of every zone since 1972: Africa/Monrovia's
    -0:44:30 was the last offset with seconds). Cached per zone and year."""
    year = ms_to_datetime(from_ms).year
    if offset_s(zone, from_ms // 1000) % MINUTE_S:
        return False
    return all(
        t.at_s % MINUTE_S == 0 and t.after_s % MINUTE_S == 0
        for y in (year, year + 1)
        for t in year_transitions(zone, y)
    )


@functools.lru_cache(maxsize=16_384)
def shortest_gap_ms(rule: CronRule, from_ms: int) -> int | None:
    """The shortest interval between the first SPREAD_PROBE occurrences of `rule` after
    `from_ms` (None: fewer than two). Nominal times only, so it is the same for every job with
    this rule whatever its spread: computed once per rule (a hundred searches each, most of what
    accepting a cron definition cost before), not once per job."""
    occs = CompiledSchedule("", rule.zone, rule).upcoming(from_ms, SPREAD_PROBE)
    gaps = [b.nominal_ms - a.nominal_ms for a, b in itertools.pairwise(occs)]
    return min(gaps) if gaps else None
