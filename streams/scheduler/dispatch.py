"""Sending runs out and calling them back: fire one, let the overlap policy and the job's
concurrency group decide when a run is active, keep waiting runs and start them when the way is
free, revoke what went out ahead, ask a worker to stop, and the per-job limit on runs."""

from __future__ import annotations

from dataclasses import replace
from operator import attrgetter

from kadence.clock import ms_to_datetime
from kadence.envelope import payload_refusal
from kadence.models import (
    Decision,
    DeliveryFormat,
    ExecutionRevoked,
    KafkaTarget,
    OverlapPolicy,
    TriggerKind,
)
from kadence.timeengine.engine import Occurrence
from kadence.timeengine.identity import execution_id
from streams.scheduler.entries import Pending, Running
from streams.scheduler.fired import chained_details, fired_history
from streams.scheduler.requested import execution
from streams.scheduler.settled import dropped
from streams.scheduler.state import (
    RUNNING_LIMIT,
    JobState,
    active_runs,
    at_running_limit,
    remember,
    room_for_override,
)
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
    free_at,
    group_blocked,
    grouped,
)

_EXPIRES = attrgetter("expires_ms")
SCHEDULED = ("schedule", "catch_up")
"""Triggers of a scheduled occurrence: only these count against the overlap buffer's limit."""


def fire(
    state: JobState,
    effects: Effects,
    facts: Facts,
    shot: Shot,
    *,
    backfill: str | None = None,
    history: bool = True,
) -> JobState:
    """Dispatch `shot`: the execution, a `fired` history record (unless the caller writes one
    for a series of runs: `history=False`), and a running entry that holds the overlap slot
    until its outcome (or its timeout and lease have passed). `backfill`: the request id of the
    backfill that fired it (its progress counts these records)."""
    d = state.definition(facts.codec)
    ex = execution(state, facts, shot)
    effects.out.append(Emit(Sink.executions, ex))
    if shot.due_ms - facts.now_ms < URGENT_WITHIN_MS:
        effects.urgent = True
    effects.started += 1
    if shot.trigger in (TriggerKind.schedule, TriggerKind.catch_up):
        second = max(shot.due_ms, facts.now_ms) // 1000  # when it may start
        effects.scheduled[second] = effects.scheduled.get(second, 0) + 1
    expires = max(facts.now_ms, shot.due_ms) + d.timeout_ms + d.lease_ttl_ms
    running, unsettled = state.running, state.unsettled
    if sum(map(facts.now_ms.__ge__, map(_EXPIRES, running))):  # in C: ~60 at a refill's fires
        running = tuple(r for r in state.running if r.expires_ms > facts.now_ms)
        unsettled = dropped(state, (r for r in state.running if r.expires_ms <= facts.now_ms))
    run = Running(shot.execution_id, shot.nominal_ms, shot.attempt, expires)
    counted = shot.attempt == 1 and shot.trigger in (TriggerKind.schedule, TriggerKind.catch_up)
    done = state.runs_done + counted
    state = state.evolve(
        running=(*running, run), fired=state.fired + 1, unsettled=unsettled, runs_done=done
    )
    if history:  # after the count: a limited job's record carries it (fired.py)
        fired_history(state, effects, facts, shot, backfill=backfill)
    if counted and d.max_runs is not None and done == d.max_runs:
        effects.history(
            state,
            facts,
            Decision.completed,
            reason=f"ran its {d.max_runs} scheduled runs (max_runs): no more occurrences",
            details={"version": str(d.version)},
        )
    return state


def start(
    state: JobState, effects: Effects, facts: Facts, shot: Shot, *, backfill: str | None = None
) -> JobState:
    """Fire `shot` now, unless the job's concurrency group is running a run (or another job of
    the group waits first): then it waits in the buffer, never skipped, and starts when the
    group is free. Every run that is not a scheduled occurrence starts here."""
    if group_blocked(state, facts):
        return wait(state, effects, facts, shot, group_reason(state, facts))
    return fire(state, effects, facts, shot, backfill=backfill)


def group_reason(state: JobState, facts: Facts) -> str:
    key = state.definition(facts.codec).concurrency_key
    if busy(state, facts):
        return f"concurrency group {key} is running a run; this one starts when it ends"
    return f"concurrency group {key}: another job of the group has waited longer"


def wait(state: JobState, effects: Effects, facts: Facts, shot: Shot, why: str) -> JobState:
    """Keep `shot` waiting in the job's buffer (with its trigger and attempt), `buffered` in
    history; the job looks again when what it waits for has expired, if nothing wakes it."""
    effects.history(
        state,
        facts,
        Decision.buffered,
        execution_id=shot.execution_id,
        nominal_at=ms_to_datetime(shot.nominal_ms),
        attempt=shot.attempt,
        reason=why,
        details={"trigger": shot.trigger.value, **chained_details(shot)},
    )
    pending = Pending(
        shot.execution_id, shot.nominal_ms, shot.due_ms, shot.attempt, shot.trigger.value
    )
    return state.evolve(buffered=(*state.buffered, pending), recheck_ms=free_at(state, facts))


def fire_or_overlap(
    state: JobState, effects: Effects, facts: Facts, occ: Occurrence, trigger: TriggerKind
) -> JobState:
    """Fire a scheduled occurrence unless a run is active; then the overlap policy decides
    (in a concurrency group: `_in_group`)."""
    key = state.definition(facts.codec).key
    exec_id = execution_id(key, occ.nominal_ms)
    policy = state.definition(facts.codec).overlap
    shot = Shot(exec_id, occ.nominal_ms, occ.due_ms, trigger)
    if at_running_limit(state, facts.now_ms):
        why = f"{RUNNING_LIMIT} runs of this job are still running (the per-job limit)"
        return skip(state, effects, facts, occ, exec_id=exec_id, why=why)
    if grouped(state, facts):
        return _in_group(state, effects, facts, occ, shot)
    if not busy(state, facts) or policy is OverlapPolicy.allow:
        return fire(state, effects, facts, shot)
    if policy is OverlapPolicy.cancel_other:
        for run in state.running:
            why = f"overlap=cancel_other: {exec_id} is due"
            stop_running(state, effects, facts, run, why)
        state = state.evolve(running=(), unsettled=dropped(state, state.running))
        return fire(state, effects, facts, shot)
    why = f"overlap={policy.value}: previous run still running"
    return _buffer_or_skip(state, effects, facts, occ, shot, why=why)


def _in_group(
    state: JobState, effects: Effects, facts: Facts, occ: Occurrence, shot: Shot
) -> JobState:
    """A scheduled occurrence of a job in a concurrency group, where a run of any job of the
    group is active and nothing overlaps: `allow` waits as `buffer_all` does, and
    `cancel_other` stops the job's own run (never another job's) and waits as `buffer_one`."""
    if not group_blocked(state, facts):
        return fire(state, effects, facts, shot)
    policy = state.definition(facts.codec).overlap
    why = f"overlap={policy.value}, {group_reason(state, facts)}"
    if policy is OverlapPolicy.cancel_other and not _scheduled_waiting(state):
        for run in state.running:
            if run.expires_ms > facts.now_ms:
                stop = f"overlap=cancel_other: {shot.execution_id} is due"
                stop_running(state, effects, facts, run, stop)
    return _buffer_or_skip(state, effects, facts, occ, shot, why=why)


def _scheduled_waiting(state: JobState) -> int:
    return sum(1 for p in state.buffered if p.trigger in SCHEDULED)


def _buffer_or_skip(
    state: JobState, effects: Effects, facts: Facts, occ: Occurrence, shot: Shot, *, why: str
) -> JobState:
    """Keep the occurrence waiting while the overlap policy's buffer has room, else skip it."""
    d = state.definition(facts.codec)
    limits: dict[OverlapPolicy, int] = {
        OverlapPolicy.buffer_one: 1,
        OverlapPolicy.cancel_other: 1,
        OverlapPolicy.buffer_all: d.max_buffered,
        OverlapPolicy.allow: d.max_buffered,
    }
    if _scheduled_waiting(state) < limits.get(d.overlap, 0):
        return wait(state, effects, facts, shot, why)
    return skip(state, effects, facts, occ, exec_id=shot.execution_id, why=why)


def over_tenant_cap(state: JobState, effects: Effects, facts: Facts, due_ms: int) -> str | None:
    """Why the tenant's caps leave no room for one more scheduled run due at `due_ms`."""
    mine = state.held_ms is not None and state.held_ms // 1000 == facts.now_ms // 1000
    return facts.tenant.why_not(due_ms, effects.scheduled, effects.started, mine=mine)


def hold(state: JobState, effects: Effects, facts: Facts, nominal_ms: int, why: str) -> JobState:
    """The tenant's caps leave no room for the occurrence at `nominal_ms`: it and what follows
    wait (the cursor stays before it), and the job reserves a place in the first second with
    room, when it looks again (tenant_limits.py). One `throttled` history record when the job
    starts to wait."""
    if state.held_ms is None:
        effects.history(
            state,
            facts,
            Decision.throttled,
            execution_id=execution_id(state.definition(facts.codec).key, nominal_ms),
            nominal_at=ms_to_datetime(nominal_ms),
            reason=f"waits: {why}",
        )
    held = facts.tenant.next_place(effects.scheduled) * 1000
    return advance_to(state, nominal_ms - 1, facts).evolve(held_ms=held)


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
    """Start the oldest waiting run once nothing it waits for runs (and, in a concurrency group,
    it is the job's turn); otherwise look again when what it waits for has expired. A waiting
    retry whose tenant circuit is not closed goes back to the retries (the breaker decides)."""
    while state.buffered:
        if busy(state, facts) or (grouped(state, facts) and not facts.group_turn):
            recheck = free_at(state, facts)
            return state if recheck == state.recheck_ms else state.evolve(recheck_ms=recheck)
        head, rest = state.buffered[0], state.buffered[1:]
        gate = facts.gate
        if head.trigger == TriggerKind.retry.value and not gate.closed:
            held = replace(head, due_ms=max(facts.now_ms, gate.retry_at_ms))
            if gate.reason:
                circuit_held(state, effects, facts, held, gate.reason)
            state = state.evolve(buffered=rest, retries=(*state.retries, held))
            continue
        payload = state.payload_of(head.execution_id)
        shot = Shot(
            head.execution_id,
            head.nominal_ms,
            head.due_ms,
            TriggerKind(head.trigger),
            head.attempt,
            payload,
        )
        state = fire(state.evolve(buffered=rest), effects, facts, shot)
        return state.evolve(recheck_ms=free_at(state, facts) if rest else None)
    return state if state.recheck_ms is None else state.evolve(recheck_ms=None)


def room_for(state: JobState, facts: Facts, runs: int, what: str) -> None:
    """Refuse a command that would take the job past `RUNNING_LIMIT` runs at once (running or
    waiting to start)."""
    active = active_runs(state, facts.now_ms) + len(state.buffered)
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
    return Emit(Sink.executions, revoked, pool=d.target.pool)


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
        unsettled=dropped(state, (r for r in state.running if r.execution_id in gone)),
        fired=state.fired - len(revoked),
        runs_done=max(0, state.runs_done - len(revoked)),  # runs sent ahead: scheduled ones
    )
    if rewind:
        state = advance_to(state, min(a.cursor_before_ms for a in revoked), facts)
    return state


def keep_override(state: JobState, facts: Facts, exec_id: str, payload: bytes) -> JobState:
    """Remember a run's payload override for its retries, dead letter and replays, if the job's
    state has room for it and its target's record can hold it (else the trigger or replay is
    refused, saying why; a JSON envelope holds it as a JSON string: kadence/envelope.py)."""
    target = state.definition(facts.codec).target
    if isinstance(target, KafkaTarget) and target.format is DeliveryFormat.json:
        too_large = payload_refusal(payload)
        if too_large is not None:
            raise Refused("payload_too_large", f"{exec_id}: {too_large}")
    if not room_for_override(state, exec_id, payload, facts.state_limit):
        held = sum(len(p) for _, p in state.payloads)
        raise Refused(
            "payload_override_too_large",
            f"a payload override of {len(payload)} bytes does not fit in this job's state "
            f"beside the {held} bytes of overrides its runs in progress keep for their retries "
            f"and dead letters and room for {RUNNING_LIMIT} runs at once; set the payload in "
            "the job's definition, or wait for those runs to finish",
        )
    return state.evolve(payloads=(*state.payloads, (exec_id, payload)))


def circuit_held(state: JobState, effects: Effects, facts: Facts, retry: Pending, why: str) -> None:
    """History: `retry` waits for the tenant's circuit, until its (new) due time."""
    effects.history(
        state,
        facts,
        Decision.circuit_open,
        execution_id=retry.execution_id,
        attempt=retry.attempt,
        nominal_at=ms_to_datetime(retry.nominal_ms),
        due_at=ms_to_datetime(retry.due_ms),
        reason=why,
    )
