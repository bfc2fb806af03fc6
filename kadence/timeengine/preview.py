"""Preview: the next N occurrences of a schedule as a user checks them, with DST explained."""

from __future__ import annotations

from dataclasses import dataclass

from kadence.clock import ms_to_datetime
from kadence.headers import iso_utc
from kadence.timeengine.engine import CompiledSchedule, DstNote, Occurrence, local_time
from kadence.timeengine.identity import execution_id


@dataclass(frozen=True)
class PreviewRow:
    nominal_utc: str
    due_utc: str
    local: str
    """Local time of the nominal instant, ISO 8601 with its offset."""
    zone_abbrev: str
    execution_id: str
    fires: bool
    note: str


def _hhmm(occ: Occurrence) -> str:
    return occ.wall.strftime("%H:%M:%S" if occ.wall.second else "%H:%M")


def describe(occ: Occurrence, gap: str, fold: str) -> str:
    """A sentence on how DST shaped this occurrence ('' when it did not)."""
    t = _hhmm(occ)
    match occ.note:
        case DstNote.shifted:
            return (
                f"{t} does not exist (clocks spring forward); runs at the first valid instant "
                f"after the gap (dst_gap={gap})"
            )
        case DstNote.skipped:
            return f"{t} does not exist (clocks spring forward); skipped (dst_gap={gap})"
        case DstNote.fold_first:
            return f"{t} happens twice (clocks fall back); this is the first (dst_fold={fold})"
        case DstNote.fold_second:
            return f"{t} happens twice (clocks fall back); this is the second (dst_fold={fold})"
    return ""


def preview(compiled: CompiledSchedule, after_ms: int, count: int) -> list[PreviewRow]:
    """The next `count` firings after `after_ms`, with any DST-skipped ones in between."""
    rows: list[PreviewRow] = []
    gap = compiled.rule.gap.value if compiled.rule else "shift"
    fold = compiled.rule.fold.value if compiled.rule else "auto"
    fired = 0
    cursor = after_ms
    while fired < count:
        occ, skipped = compiled.next_with_skipped(cursor)
        for s in skipped:
            rows.append(_row(compiled, s, gap, fold, fires=False))
        if occ is None:
            break
        rows.append(_row(compiled, occ, gap, fold, fires=True))
        fired += 1
        cursor = occ.nominal_ms
    return rows


def _row(
    compiled: CompiledSchedule, occ: Occurrence, gap: str, fold: str, fires: bool
) -> PreviewRow:
    local = local_time(compiled.zone, occ.nominal_ms)
    return PreviewRow(
        nominal_utc=iso_utc(ms_to_datetime(occ.nominal_ms)),
        due_utc=iso_utc(ms_to_datetime(occ.due_ms)),
        local=local.isoformat(timespec="seconds"),
        zone_abbrev=local.tzname() or "",
        execution_id=execution_id(compiled.job_key, occ.nominal_ms) if fires else "",
        fires=fires,
        note=describe(occ, gap, fold),
    )
