"""A job's definition: admit it, create or update the job, delete it, and recompute it when
the tz database changes."""

from __future__ import annotations

from kadence.acceptance import Refusal, accepted
from kadence.clock import ms_to_datetime
from kadence.models import Decision, HistoryRecord, OnceSchedule, ScheduleDefinition
from kadence.pools import unknown_pool
from kadence.timeengine.engine import CompiledSchedule
from streams.scheduler.catchup import catch_up
from streams.scheduler.config import SchedulerConfig
from streams.scheduler.dispatch import revoke
from streams.scheduler.entries import Ahead
from streams.scheduler.paused import skip_paused
from streams.scheduler.state import JobState
from streams.scheduler.step import (
    HISTORY_REASON_CHARS,
    Effects,
    Emit,
    Facts,
    Refused,
    Sink,
    advance_to,
    settle,
)


def admit(
    state: JobState | None,
    definition: ScheduleDefinition,
    facts: Facts,
    *,
    key: bytes,
    partition: int,
    cfg: SchedulerConfig,
) -> CompiledSchedule:
    """Refuse a definition the scheduler will not take (wrong key or partition, stale version,
    a schedule that does not compile, a worker pool this deployment does not have). An invalid
    schedule or pool also gets a `definition_rejected` history record, so the job's history
    says why its change did not take. Accepted: its schedule, compiled (`apply_definition`
    keeps it)."""
    current = state.definition(facts.codec).version if state is not None else None
    refused = accepted(key, partition, cfg.job_partitions, definition, current)
    if not isinstance(refused, Refusal):
        unknown = unknown_pool(definition.target, cfg.topics.pool_executions)
        if unknown is None:
            return refused
        refused = Refusal("unknown_pool", unknown)
    out: list[Emit] = []
    if refused.code in ("invalid_schedule", "unknown_pool"):
        record = HistoryRecord(
            tenant=definition.tenant,
            job_id=definition.job_id,
            decision=Decision.definition_rejected,
            at=ms_to_datetime(facts.now_ms),
            reason=refused.reason[:HISTORY_REASON_CHARS],
        )
        out.append(Emit(Sink.history, record))
    raise Refused(refused.code, refused.reason, out)


def apply_definition(
    state: JobState | None,
    definition: ScheduleDefinition,
    raw: bytes,
    record_ts_ms: int,
    facts: Facts,
    *,
    compiled: CompiledSchedule | None = None,
) -> Effects:
    """Create or update a job (`compiled`: its schedule, if `admit` compiled it already). A
    version not above the current one is refused.

    Occurrences the old version dispatched ahead and that are not due yet are revoked and the
    cursor goes back before them, so the new version decides about them.
    """
    effects = Effects(state)
    if state is not None:
        current = state.definition(facts.codec).version
        if definition.version <= current:
            raise Refused(
                "stale_version",
                f"version {definition.version} of {definition.key} is not newer than {current}",
            )
        why = f"job changed to version {definition.version} before it was due"
        was_done = state.runs_left(facts.codec) == 0
        state = revoke(state, effects, facts, why, rewind=True)
        if was_done:  # it ran out of runs: a version with more starts from now, as a resume
            state = state.evolve(cursor_ms=max(state.cursor_ms, record_ts_ms))
    if state is None:
        if isinstance(definition.schedule, OnceSchedule):
            cursor = int(definition.schedule.run_at.timestamp() * 1000) - 1
        else:
            cursor = record_ts_ms
        state = JobState(
            raw, cursor, cursor, None, None, facts.tzdb, _definition=definition, _compiled=compiled
        )
    else:  # the definition decoded (and compiled) already: not again from `raw`
        state = state.evolve(definition_bytes=raw, _definition=definition, _compiled=compiled)
    state = _pause_as_defined(state, effects, facts, definition.paused)
    effects.state = advance_to(state, state.cursor_ms, facts)
    if definition.max_runs is not None and state.runs_done >= definition.max_runs:
        effects.history(
            state,
            facts,
            Decision.completed,
            reason=(
                f"version {definition.version} allows {definition.max_runs} scheduled runs "
                f"(max_runs) and the job has run {state.runs_done}: no more occurrences"
            ),
            details={"version": str(definition.version)},
        )
    return settle(effects, facts)


def _pause_as_defined(state: JobState, effects: Effects, facts: Facts, paused: bool) -> JobState:
    """A version that pauses decides first about what was due before it; one that resumes
    records what fell due while paused as skipped (as PauseJob and ResumeJob do)."""
    due = state.next_due_ms is not None and state.next_due_ms <= facts.now_ms
    if paused and not state.paused:
        if due:
            state = catch_up(state, effects, facts)
        return state.evolve(paused=True, paused_at_ms=facts.now_ms)
    if state.paused and not paused:
        return skip_paused(state, effects, facts).evolve(paused=False, paused_at_ms=None)
    return state


def apply_tzdb(state: JobState, facts: Facts) -> Effects:
    """Recompute the job under the running tz database (its schedule compiles with the zones
    this process loaded): what went out ahead and moved is revoked, and the next occurrence is
    recomputed from the cursor; a history record reports a next occurrence that moved."""
    effects = Effects(state)
    moved = _moved_ahead(state, facts)
    if moved:
        why = f"tz database {state.tzdb} -> {facts.tzdb} moved it"
        for a in moved:
            state = revoke(state, effects, facts, why, rewind=False, only=a.execution_id)
        cursor = min(a.cursor_before_ms for a in moved)
    else:
        cursor = state.cursor_ms
    new = advance_to(state, cursor, facts)
    effects.state = new
    if new.next_nominal_ms != state.next_nominal_ms:
        old = ms_to_datetime(state.next_nominal_ms).isoformat() if state.next_nominal_ms else "none"
        now = ms_to_datetime(new.next_nominal_ms).isoformat() if new.next_nominal_ms else "none"
        effects.history(
            new,
            facts,
            Decision.rescheduled,
            nominal_at=ms_to_datetime(new.next_nominal_ms) if new.next_nominal_ms else None,
            reason=f"tz database {state.tzdb} -> {facts.tzdb}: next occurrence {old} -> {now}",
            details={"old_nominal_ms": str(state.next_nominal_ms), "tzdb": facts.tzdb},
        )
    return settle(effects, facts)


def _moved_ahead(state: JobState, facts: Facts) -> list[Ahead]:
    """The occurrences dispatched ahead that the running rules no longer have (a different
    instant), from the first such one on (those after it were computed from it)."""
    compiled = state.compiled(facts.codec)
    pending = [a for a in state.ahead if a.due_ms > facts.now_ms]
    for i, a in enumerate(pending):
        occ = compiled.next_after(a.nominal_ms - 1)
        if occ is None or (occ.nominal_ms, occ.due_ms) != (a.nominal_ms, a.due_ms):
            return pending[i:]
    return []


def apply_delete(state: JobState, facts: Facts) -> Effects:
    """Delete the job: revoke what went out ahead; nothing fires after this."""
    return _removed(state, facts, "job deleted", "job deleted; nothing fires after this")


def apply_moved_away(state: JobState, facts: Facts, version: int, partition: int) -> Effects:
    """Remove this partition's copy of the job: version `version` of it lives on scheduler
    partition `partition` (a new concurrency key moved it there) and fires from there."""
    mine = state.definition(facts.codec).version
    why = (
        f"job moved: version {version} fires from scheduler partition {partition} (a job lives "
        f"where its highest version is; a new concurrency key moves it); this copy, version "
        f"{mine}, is removed. To move a job, write a version above its current one"
    )
    return _removed(state, facts, "job moved", why)


def _removed(state: JobState, facts: Facts, what: str, why: str) -> Effects:
    effects = Effects(None)
    revoke(state, effects, facts, f"{what} before it was due", rewind=False)
    effects.history(state, facts, Decision.deleted, reason=why)
    return effects
