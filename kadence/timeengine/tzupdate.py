"""tz database updates: recompute cursors computed with an older database, report what moved.

Zones change by legislation, sometimes with weeks of notice. Each job's state records the tz
database version its next occurrence was computed with; when the running version differs, the
scheduler recomputes from the job's cursor and reports every job whose next occurrence shifted
(old -> new), so a changed rule is never applied silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from kadence.models import CronSchedule, OnceSchedule
from kadence.timeengine.compile import ZoneProvider, compile_schedule
from kadence.timeengine.zones import load_zone


@dataclass(frozen=True)
class CursorState:
    """What the scheduler keeps per job that the tz database affects."""

    job_key: str
    schedule: CronSchedule | OnceSchedule
    cursor_ms: int
    """The last nominal instant handled; the next occurrence is strictly after it."""
    next_nominal_ms: int | None
    tzdb_version: str


@dataclass(frozen=True)
class Shift:
    job_key: str
    timezone: str
    old_nominal_ms: int | None
    new_nominal_ms: int | None


def recompute(
    states: Iterable[CursorState], version: str, zones: ZoneProvider = load_zone
) -> tuple[list[CursorState], list[Shift]]:
    """States recomputed under tz database `version`, and the jobs whose next occurrence moved.

    States already at `version` are returned unchanged. One-off jobs are instants and never move.
    """
    updated: list[CursorState] = []
    shifts: list[Shift] = []
    for state in states:
        if state.tzdb_version == version or isinstance(state.schedule, OnceSchedule):
            updated.append(replace(state, tzdb_version=version))
            continue
        occ = compile_schedule(state.schedule, state.job_key, zones).next_after(state.cursor_ms)
        new = occ.nominal_ms if occ else None
        if new != state.next_nominal_ms:
            shifts.append(Shift(state.job_key, state.schedule.timezone, state.next_nominal_ms, new))
        updated.append(replace(state, next_nominal_ms=new, tzdb_version=version))
    return updated, shifts
