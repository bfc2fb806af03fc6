"""The `fired` history records of dispatched runs: one per run, or one for a steady series of a
job's scheduled runs dispatched together ahead of their due times (kadence/fired_series.py: a
per-second job's refill of 22 runs is one record, not 22)."""

from __future__ import annotations

from collections.abc import Sequence

from kadence.chains import chain_depth_of
from kadence.clock import ms_to_datetime
from kadence.fired_series import MAX_RUNS, series_details
from kadence.models import Decision, TriggerKind
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Facts, Shot


def fired_history(
    state: JobState,
    effects: Effects,
    facts: Facts,
    shot: Shot,
    *,
    backfill: str | None = None,
    series: dict[str, str] | None = None,
) -> None:
    """The `fired` record of `shot`, or of the series it starts (`series`: its `runs` and
    `step_ms` details, kadence/fired_series.py)."""
    details = {
        "trigger": shot.trigger.value,
        "lateness_ms": str(max(0, facts.now_ms - shot.due_ms)),
    }
    if backfill is not None:
        details["backfill"] = backfill
    details.update(chained_details(shot))
    if shot.due_ms > facts.now_ms:
        details["ahead_ms"] = str(shot.due_ms - facts.now_ms)
    counted = shot.trigger in (TriggerKind.schedule, TriggerKind.catch_up) and shot.attempt == 1
    if counted and state.definition(facts.codec).max_runs is not None:
        details["runs_done"] = str(state.runs_done)  # after this run (or series): what the
        # query view needs to list only the runs `max_runs` leaves
    effects.history(
        state,
        facts,
        Decision.fired,
        execution_id=shot.execution_id,
        nominal_at=ms_to_datetime(shot.nominal_ms),
        due_at=ms_to_datetime(shot.due_ms),
        attempt=shot.attempt,
        reason="" if shot.caused_by is None else f"chain link: after {shot.caused_by}",
        details=details if series is None else {**details, **series},
    )


def chained_details(shot: Shot) -> dict[str, str]:
    """What a run triggered by a chain link says of its cause in history (others: nothing)."""
    if shot.caused_by is None:
        return {}
    return {"caused_by": shot.caused_by, "chain_depth": str(chain_depth_of(shot.execution_id))}


def series_history(state: JobState, effects: Effects, facts: Facts, shots: Sequence[Shot]) -> None:
    """The `fired` records of `shots`, the job's own scheduled first attempts in nominal order
    (`_dispatch_ahead` fires them with `history=False`): one per steady series of runs all
    dispatched ahead (equal steps, the same offset from nominal to due time), one per run for
    the others."""
    i = 0
    while i < len(shots):
        j = _series_end(shots, i, facts.now_ms)
        if j - i > 1:
            step = shots[i + 1].nominal_ms - shots[i].nominal_ms
            series = series_details({}, j - i, step)
            fired_history(state, effects, facts, shots[i], series=series)
        else:
            fired_history(state, effects, facts, shots[i])
        i = j


def _series_end(shots: Sequence[Shot], i: int, now_ms: int) -> int:
    """Where the series that starts at `shots[i]` ends (exclusive): runs dispatched ahead, in
    equal steps, the same offset from nominal to due time, at most MAX_RUNS."""
    first = shots[i]
    if first.due_ms <= now_ms or i + 1 == len(shots):
        return i + 1
    step = shots[i + 1].nominal_ms - first.nominal_ms
    offset = first.due_ms - first.nominal_ms
    j = i + 1
    while (
        j < len(shots)
        and j - i < MAX_RUNS
        and shots[j].nominal_ms - shots[j - 1].nominal_ms == step
        and shots[j].due_ms - shots[j].nominal_ms == offset
    ):
        j += 1
    return j if step > 0 else i + 1
