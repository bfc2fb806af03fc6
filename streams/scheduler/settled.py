"""Which outcomes a job has applied already, in a size that does not grow with its age.

An outcome of attempt `a` of execution `e` is applied once; a second one (a redelivered run
that also finished, the reaper giving up on a run that did) changes nothing. The job used to
remember its last 1 000 `<execution id>#<attempt>`; it now remembers:

- `settled_ms`, a watermark: every scheduled execution (`<job key>@<nominal>`) whose nominal
  instant is at or before it has had every outcome it will have applied, unless it is *live*
  (running, waiting, awaiting a retry, dispatched ahead: a replay or a backfill may run an old
  instant again) or listed in `unsettled`; a manual run (`…@manual:<request id>`) likewise
  while its request id is among the job's remembered ones (`request_ids`, the last 1 000);
- `finished`, the `<execution id>#<attempt>` not covered so: the attempts of an execution still
  live (a retry pending), and outcomes that came before an earlier run's (out of order);
- `unsettled`, the executions that left `running` without an outcome (expired, stopped by
  overlap=cancel_other, revoked): their outcome may still come, and is applied.

The watermark moves up to the newest applied execution older than every live run, and the
entries it covers are dropped (`_folded`), so a job that runs every second keeps a few entries.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import lru_cache
from itertools import chain
from operator import attrgetter

from streams.scheduler.entries import Running
from streams.scheduler.state import JobState, remember

_ID = attrgetter("execution_id")
_NOMINAL = attrgetter("nominal_ms")


@lru_cache(maxsize=4096)
def _instant(suffix: str) -> int | None:
    if suffix.startswith("manual:") or not suffix.endswith("Z"):
        return None
    try:
        return int(datetime.fromisoformat(suffix).timestamp() * 1000)
    except ValueError:
        return None


def nominal_of(execution_id: str) -> int | None:
    """The nominal instant a scheduled execution id names; None for a manual one."""
    return _instant(execution_id.rpartition("@")[2])


def _live(state: JobState) -> set[str]:
    return {
        *map(_ID, state.running),
        *map(_ID, state.buffered),
        *map(_ID, state.retries),
        *map(_ID, state.ahead),
    }


def _covered(state: JobState, execution_id: str, nominal: int | None, mark: int | None) -> bool:
    """Whether the watermark `mark` (a scheduled run) or the remembered request ids (a manual
    run: its trigger was accepted, so it ran) say this execution ran; live or unsettled aside."""
    if nominal is None:
        return execution_id.rpartition("@manual:")[2] in state.request_ids
    return mark is not None and nominal <= mark


def already_applied(state: JobState, execution_id: str, attempt: int) -> bool:
    """Whether an outcome of this attempt was applied before (a duplicate changes nothing)."""
    if f"{execution_id}#{attempt}" in state.finished:
        return True
    nominal = nominal_of(execution_id)
    if execution_id in state.unsettled or not _covered(
        state, execution_id, nominal, state.settled_ms
    ):
        return False
    return execution_id not in _live(state)


def applied(state: JobState, execution_id: str, attempt: int) -> JobState:
    """Remember that this attempt's outcome was applied (call it once the state says what
    follows: the run left `running`, a retry or dead letter was added), and fold."""
    finished, unsettled, mark = applied_fields(state, state.running, execution_id, attempt)
    return state.evolve(finished=finished, unsettled=unsettled, settled_ms=mark)


def applied_fields(
    state: JobState, running: tuple[Running, ...], execution_id: str, attempt: int
) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    """`(finished, unsettled, settled_ms)` of `applied` on `state` with `running` as its runs:
    a caller that changes `running` too (the quiet success, outcomes.py) makes one copy of
    the state, not two."""
    unsettled = state.unsettled
    if execution_id in unsettled:
        unsettled = tuple(e for e in unsettled if e != execution_id)
    finished = remember(state.finished, f"{execution_id}#{attempt}")
    mark, kept = _folded(state, running, finished, unsettled)
    return kept, unsettled, mark


def _folded(
    state: JobState,
    running: tuple[Running, ...],
    finished: tuple[str, ...],
    unsettled: tuple[str, ...],
) -> tuple[int | None, tuple[str, ...]]:
    """The watermark and the `finished` entries it does not cover. Its passes over the job's
    runs go through `map` in C, not a Python step per run: a per-second job dispatched 30 s
    ahead has about 60 runs and look-ahead entries at every outcome."""
    waiting = (*state.buffered, *state.retries)
    ahead = state.ahead
    live = {*map(_ID, running), *map(_ID, waiting), *map(_ID, ahead)}
    floor = min(
        chain(map(_NOMINAL, running), map(_NOMINAL, waiting), map(_NOMINAL, ahead)), default=None
    )
    mark = state.settled_ms
    parsed: list[tuple[str, int | None, str]] = []
    for entry in finished:
        exec_id = entry.rpartition("#")[0]
        nominal = nominal_of(exec_id)
        parsed.append((entry, nominal, exec_id))
        if nominal is not None and (floor is None or nominal < floor) and exec_id not in live:
            mark = nominal if mark is None else max(mark, nominal)
    kept = tuple(
        entry
        for entry, nominal, exec_id in parsed
        if exec_id in live or exec_id in unsettled or not _covered(state, exec_id, nominal, mark)
    )
    return mark, kept


def reopened(state: JobState, ids: Iterable[str]) -> JobState:
    """Executions run again (a replay of their dead letter): forget their applied outcomes."""
    gone = set(ids)
    return state.evolve(
        finished=tuple(f for f in state.finished if f.rpartition("#")[0] not in gone)
    )


def dropped(state: JobState, runs: Iterable[Running]) -> tuple[str, ...]:
    """`unsettled` after these runs left `running` without an outcome: theirs is still
    applied when it comes, even once the watermark has passed their instant."""
    unsettled = state.unsettled
    for run in runs:
        if run.execution_id not in unsettled:
            unsettled = remember(unsettled, run.execution_id)
    return unsettled
