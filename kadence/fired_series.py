"""One `fired` history record for a steady series of a job's scheduled runs.

A job that dispatches ahead sends out many runs in one step (a per-second job: 15 per wake),
all of the same shape: its own execution ids (`<job key>@<nominal instant>`), equal steps, the
same offset from nominal to due time, first attempts. The scheduler writes one `fired` record
for them, the first run's, with `runs` (how many) and `step_ms` in its details; `runs_of` gives
back one record per run, as the query view shows them (and as the scheduler wrote them before
2026-12). A record without those details is one run, as always.
"""

from __future__ import annotations

from datetime import timedelta

from kadence.models import Decision, HistoryRecord
from kadence.timeengine.identity import execution_id

RUNS = "runs"
STEP_MS = "step_ms"
MAX_RUNS = 1_000
"""More runs than one step of the scheduler dispatches (firing.AHEAD_LIMIT): a record that says
more is not Kadence's, and is shown as the one run it names."""
MAX_STEP_MS = 366 * 86_400_000
"""Runs of a series are at most the longest interval apart (IntervalSchedule: 366 days)."""


def series_details(details: dict[str, str], runs: int, step_ms: int) -> dict[str, str]:
    return {**details, RUNS: str(runs), STEP_MS: str(step_ms)}


def runs_of(record: HistoryRecord) -> list[HistoryRecord]:
    """The runs a `fired` record stands for: itself, or each run of its series in order."""
    series = _series(record)
    if series is None:
        return [record]
    runs, step = series
    assert record.nominal_at is not None
    assert record.due_at is not None
    key = record.key
    first_ms = int(record.nominal_at.timestamp() * 1000)
    details = {k: v for k, v in record.details.items() if k not in (RUNS, STEP_MS)}
    ahead = details.get("ahead_ms")
    out = []
    for i in range(runs):
        shift = i * step
        own = details if ahead is None else {**details, "ahead_ms": str(int(ahead) + shift)}
        out.append(
            record.model_copy(
                update={
                    "execution_id": execution_id(key, first_ms + shift),
                    "nominal_at": record.nominal_at + timedelta(milliseconds=shift),
                    "due_at": record.due_at + timedelta(milliseconds=shift),
                    "details": own,
                }
            )
        )
    return out


def _series(record: HistoryRecord) -> tuple[int, int] | None:
    """(runs, step) when `record` is a well-formed series of more than one run."""
    details = record.details
    if record.decision is not Decision.fired or RUNS not in details:
        return None
    if record.nominal_at is None or record.due_at is None or record.execution_id is None:
        return None
    try:
        runs, step = int(details[RUNS]), int(details.get(STEP_MS, ""))
        int(details.get("ahead_ms", "0"))
    except ValueError:
        return None
    first_ms = int(record.nominal_at.timestamp() * 1000)
    own = execution_id(record.key, first_ms)
    if not 1 < runs <= MAX_RUNS or not 0 < step <= MAX_STEP_MS or record.execution_id != own:
        return None
    return runs, step
