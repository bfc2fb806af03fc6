"""Sending runs out and calling them back: fire one, let the overlap policy decide when a run
is active, revoke what went out ahead, ask a worker to stop, and the per-job limit on runs."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.models import (
    Decision,
    ExecutionRequested,
    ExecutionRevoked,
    OverlapPolicy,
    TriggerKind,
)
from kadence.timeengine.engine import Occurrence
from kadence.timeengine.identity import execution_id
from streams.scheduler.state import RUNNING_LIMIT, JobState, Pending, Running, active_runs, remember
from streams.scheduler.step import (
    URGENT_WITHIN_MS,
    Effects,
    Emit,
    Facts,
    Refused,
    Shot,
    Sink,
    advance_to,
    busy,
)


def execution(state: JobState, facts: Facts, shot: Shot) -> ExecutionRequested:
    d = state.definition(facts.codec)
    return ExecutionRequested(
        execution_id=shot.execution_id,
        tenant=d.tenant,
        job_id=d.job_id,
        definition_version=d.version,
        attempt=shot.attempt,
        trigger=shot.trigger,
        nominal_at=ms_to_datetime(shot.nominal_ms),
        due_at=ms_to_datetime(shot.due_ms),
        dispatched_at=ms_to_datetime(facts.now_ms),
        target=d.target,
        payload=d.payload if shot.payload is None else shot.payload,
        content_type=d.content_type,
        timeout_ms=d.timeout_ms,
        lease_ttl_ms=d.lease_ttl_ms,
        concurrency_key=d.concurrency_key,
    )


def fire(
    state: JobState, effects: Effects, facts: Facts, shot: Shot, *, backfill: str | None = None
) -> JobState:
    """Dispatch `shot`: the execution, a `fired` history record, and a running entry that holds
    the overlap slot until its outcome (or its timeout and lease have passed). `backfill`: the
    request id of the backfill that fired it (its progress counts these records)."""
    d = state.definition(facts.codec)
    ex = execution(state, facts, shot)
    effects.out.append(Emit(Sink.executions, ex))
    if shot.due_ms - facts.now_ms < URGENT_WITHIN_MS:
        effects.urgent = True
    details = {
        "trigger": shot.trigger.value,
        "lateness_ms": str(max(0, facts.now_ms - shot.due_ms)),
    }
    if backfill is not None:
        details["backfill"] = backfill
    if shot.due_ms > facts.now_ms:
        details["ahead_ms"] = str(shot.due_ms - facts.now_ms)
    effects.history(
        state,
        facts,
        Decision.fired,
        execution_id=shot.execution_id,
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        attempt=shot.attempt,
        details=details,
    )
    expires = max(facts.now_ms, shot.due_ms) + d.timeout_ms + d.lease_ttl_ms
    running = tuple(r for r in state.running if r.expires_ms > facts.now_ms)
    run = Running(shot.execution_id, shot.nominal_ms, shot.attempt, expires)
    return state.evolve(running=(*running, run), fired=state.fired + 1)


def fire_or_overlap(
    state: JobState, effects: Effects, facts: Facts, occ: Occurrence, trigger: TriggerKind
) -> JobState:
    """Fire a scheduled occurrence unless a run is active; then the overlap policy decides."""
    key = state.definition(facts.codec).key
    exec_id = execution_id(key, occ.nominal_ms)
    policy = state.definition(facts.codec).overlap
    nominal_at = ms_to_datetime(occ.nominal_ms)
    if active_runs(state, facts.now_ms) >= RUNNING_LIMIT:
        why = f"{RUNNING_LIMIT} runs of this job are still running (the per-job limit)"
        return skip(state, effects, facts, occ, exec_id=exec_id, why=why)
    if not busy(state, facts) or policy is OverlapPolicy.allow:
        return fire(state, effects, facts, Shot(exec_id, occ.nominal_ms, occ.due_ms, trigger))
    if policy is OverlapPolicy.cancel_other:
        for run in state.running:
            why = f"overlap=cancel_other: {exec_id} is due"
            stop_running(state, effects, facts, run, why)
        state = state.evolve(running=())
        return fire(state, effects, facts, Shot(exec_id, occ.nominal_ms, occ.due_ms, trigger))
    limit = {OverlapPolicy.buffer_one: 1, OverlapPolicy.buffer_all: None}.get(policy, 0)
    max_buffered = state.definition(facts.codec).max_buffered if limit is None else limit
    if len(state.buffered) < max_buffered:
        effects.history(
            state,
            facts,
            Decision.buffered,
            execution_id=exec_id,
            nominal_at=nominal_at,
            reason=f"overlap={policy.value}: previous run still running",
        )
        pending = Pending(exec_id, occ.nominal_ms, occ.due_ms, 1, trigger.value)
        return state.evolve(buffered=(*state.buffered, pending))
    why = f"overlap={policy.value}: previous run still running"
    return skip(state, effects, facts, occ, exec_id=exec_id, why=why)


def skip(
    state: JobState, effects: Effects, facts: Facts, occ: Occurrence, *, exec_id: str, why: str
) -> JobState:
    effects.history(
        state,
        facts,
        Decision.skipped_overlap,
        execution_id=exec_id,
        nominal_at=ms_to_datetime(occ.nominal_ms),
        reason=why,
    )
    return state.evolve(
        skipped=state.skipped + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
    )


def drain_buffer(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Fire the oldest buffered occurrence once no run is active."""
    if not state.buffered or busy(state, facts):
        return state
    head, rest = state.buffered[0], state.buffered[1:]
    state = state.evolve(buffered=rest)
    shot = Shot(head.execution_id, head.nominal_ms, head.due_ms, TriggerKind(head.trigger))
    return fire(state, effects, facts, shot)


def room_for(state: JobState, facts: Facts, runs: int, what: str) -> None:
    """Refuse a command that would take the job past `RUNNING_LIMIT` runs at once."""
    active = active_runs(state, facts.now_ms)
    if active + runs > RUNNING_LIMIT:
        raise Refused(
            "too_many_runs",
            f"{what} would make {active + runs} runs of {state.definition(facts.codec).key} at "
            f"once; a job has at most {RUNNING_LIMIT} (running now: {active}). Wait for runs "
            "to finish, or backfill a shorter range",
        )


def revocation(state: JobState, facts: Facts, execution_id: str, due_ms: int, why: str) -> Emit:
    d = state.definition(facts.codec)
    revoked = ExecutionRevoked(
        execution_id=execution_id,
        tenant=d.tenant,
        job_id=d.job_id,
        definition_version=d.version,
        due_at=ms_to_datetime(due_ms),
        revoked_at=ms_to_datetime(facts.now_ms),
        reason=why,
    )
    return Emit(Sink.executions, revoked)


def stop_running(state: JobState, effects: Effects, facts: Facts, run: Running, why: str) -> None:
    """Ask the worker running it to stop: an ExecutionRevoked on its executions partition (the
    worker holding it cancels the invocation and reports `cancelled`)."""
    effects.out.append(revocation(state, facts, run.execution_id, run.nominal_ms, why))
    effects.history(
        state, facts, Decision.cancel_requested, execution_id=run.execution_id, reason=why
    )


def revoke(
    state: JobState,
    effects: Effects,
    facts: Facts,
    why: str,
    *,
    rewind: bool,
    only: str | None = None,
) -> JobState:
    """Revoke executions dispatched ahead that are not due yet (all, or the one `only`).

    With `rewind` the cursor goes back before the first revoked one, so the occurrences are
    decided again (by a new version, or by the missed-run policy after a pause).
    """
    revoked = [
        a
        for a in state.ahead
        if a.due_ms > facts.now_ms and (only is None or a.execution_id == only)
    ]
    if not revoked:
        return state
    for a in revoked:
        effects.out.append(revocation(state, facts, a.execution_id, a.due_ms, why))
        effects.history(
            state,
            facts,
            Decision.cancelled,
            execution_id=a.execution_id,
            nominal_at=ms_to_datetime(a.nominal_ms),
            due_at=ms_to_datetime(a.due_ms),
            reason=f"dispatched ahead, revoked before its due time: {why}",
            details={"revoked": "true"},
        )
    gone = {a.execution_id for a in revoked}
    state = state.evolve(
        ahead=tuple(a for a in state.ahead if a.execution_id not in gone),
        running=tuple(r for r in state.running if r.execution_id not in gone),
        fired=state.fired - len(revoked),
    )
    if rewind:
        state = advance_to(state, min(a.cursor_before_ms for a in revoked), facts)
    return state
