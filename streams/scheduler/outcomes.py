"""How an attempt ended: free its overlap slot, retry it after a backoff, or dead-letter it;
count it in the tenant's circuit breaker; and replay dead letters on request."""

from __future__ import annotations

import hashlib
from operator import attrgetter

from kadence.chains import FAILURE, SUCCESS
from kadence.clock import ms_to_datetime
from kadence.models import (
    REDELIVERY_CAP_ERROR,
    DeadLetter,
    DeadLetterReason,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    JitterMode,
    NotifyEvent,
    OutcomeStatus,
    ReplayDeadLetter,
    TriggerKind,
)
from kadence.notifications import is_notification
from streams.scheduler import notify
from streams.scheduler.breaker import after_outcome
from streams.scheduler.chaining import follow
from streams.scheduler.dispatch import drain_buffer, keep_override, room_for, start
from streams.scheduler.entries import Pending
from streams.scheduler.paused import pause_job
from streams.scheduler.requested import execution
from streams.scheduler.settled import already_applied, applied, applied_fields, reopened
from streams.scheduler.state import DEAD_LIMIT, JobState, kept_payloads
from streams.scheduler.step import Delete, Effects, Emit, Facts, Refused, Shot, Sink, settle


def apply_outcome(
    state: JobState, outcome: ExecutionOutcome, facts: Facts, *, quick: bool = True
) -> Effects:
    """Record how an attempt ended (see `_apply_outcome`; a quiet success, `_quiet_success`,
    unless `quick` is False), and count it in the breaker of `facts` (the outcome's
    tenant's)."""
    if is_notification(outcome.execution_id):  # not a run of the job: never counted
        return settle(notify.ended(state, outcome, facts), facts)
    quiet = _quiet_success(state, outcome, facts) if quick else None
    effects = settle(quiet or _apply_outcome(state, outcome, facts), facts)
    counted = after_outcome(facts.breaker, outcome, facts.now_ms, facts.breaker_cfg)
    if counted is not None:
        effects.breaker, effects.breaker_change = counted
        if counted[1] == "opened" and effects.state is not None:
            why = counted[0].gate(facts.now_ms, facts.breaker_cfg).reason
            effects.state = notify.notify(
                effects.state,
                effects,
                facts,
                NotifyEvent.circuit_opened,
                outcome,
                reason=why,
                error=outcome.error,
            )
    return effects


def orphaned(outcome: ExecutionOutcome, now_ms: int) -> Emit | None:
    """A history record for a failed attempt of a job this partition no longer has (deleted,
    or moved to another partition by a new concurrency key, while the run was in progress): it
    is not retried, and history says so rather than nothing."""
    if outcome.status in (
        OutcomeStatus.succeeded,
        OutcomeStatus.cancelled,
        OutcomeStatus.lease_lost,
    ):
        return None
    record = HistoryRecord(
        tenant=outcome.tenant,
        job_id=outcome.job_id,
        decision=Decision.failed,
        at=ms_to_datetime(now_ms),
        execution_id=outcome.execution_id,
        attempt=outcome.attempt,
        delivery=outcome.delivery,
        nominal_at=outcome.nominal_at,
        error=outcome.error,
        reason=(
            f"attempt {outcome.attempt} {outcome.status.value} after its job was deleted or moved "
            "to another scheduler partition (a new concurrency key): it is not retried"
        ),
    )
    return Emit(Sink.history, record)


def dead_letter_depth(depth: int, effects: Effects) -> int:
    """The partition's count of dead letters not replayed, after `effects`. Never below zero:
    replaying a dead letter written before the count existed takes nothing from it."""
    return max(0, depth + effects.dead_delta)


def backoff_ms(state: JobState, facts: Facts, exec_id: str, failed_attempt: int) -> int:
    """Exponential backoff with full jitter, deterministic per (execution, attempt)."""
    retry = state.definition(facts.codec).retry
    ceiling = min(
        retry.max_backoff_ms,
        int(retry.initial_backoff_ms * retry.multiplier ** (failed_attempt - 1)),
    )
    if retry.jitter is JitterMode.none or ceiling == 0:
        return ceiling
    digest = hashlib.blake2b(f"{exec_id}#{failed_attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (ceiling + 1)


def replay(state: JobState, effects: Effects, cmd: ReplayDeadLetter, facts: Facts) -> JobState:
    """Run dead letters again: same execution id, attempt 1, the retry policy afresh. A letter
    the job no longer remembers (older than its last DEAD_LIMIT) runs from the copy the command
    carries (`letter`, read back from the dead-letter topic), with that letter's payload."""
    if cmd.execution_id is not None and _in_progress(state, cmd.execution_id):
        raise Refused(
            "run_active",
            f"replay {cmd.request_id}: a run of {cmd.execution_id} is in progress (running, "
            "waiting or retrying); replay it once that run has ended",
        )
    chosen = [p for p in state.dead if cmd.execution_id in (None, p.execution_id)]
    if not chosen and cmd.letter is not None:
        return _replay_letter(state, effects, cmd.letter, facts)
    if not chosen:
        what = cmd.execution_id or "any dead letter"
        effects.history(
            state,
            facts,
            Decision.cancelled,
            execution_id=cmd.execution_id,
            reason=f"replay {cmd.request_id}: {what} is not among this job's recent dead letters",
        )
        return state
    room_for(state, facts, len(chosen), f"a replay of {len(chosen)} dead letters")
    ids = {p.execution_id for p in chosen}
    state = state.evolve(dead=tuple(p for p in state.dead if p.execution_id not in ids))
    state = reopened(state, ids)
    effects.dead_delta -= len(chosen)
    for p in chosen:
        payload = state.payload_of(p.execution_id)
        shot = Shot(p.execution_id, p.nominal_ms, facts.now_ms, TriggerKind.replay, 1, payload)
        state = start(state, effects, facts, shot)
    return state


def _in_progress(state: JobState, execution_id: str) -> bool:
    """A run of `execution_id` runs, waits to start (buffered, ahead) or awaits a retry: a
    replay now would run the same occurrence twice at once."""
    return (
        any(r.execution_id == execution_id for r in state.running)
        or any(p.execution_id == execution_id for p in (*state.buffered, *state.retries))
        or any(a.execution_id == execution_id for a in state.ahead)
    )


def _replay_letter(
    state: JobState, effects: Effects, letter: ExecutionRequested, facts: Facts
) -> JobState:
    """Replay a dead letter the job no longer remembers, from its copy: the job's target, the
    letter's payload (kept for the run's retries when it is not the job's own)."""
    room_for(state, facts, 1, "a replay")
    exec_id = letter.execution_id
    state = reopened(state, [exec_id])
    own = letter.payload != state.definition(facts.codec).payload
    if own and state.payload_of(exec_id) is None:
        state = keep_override(state, facts, exec_id, letter.payload)
    nominal = int(letter.nominal_at.timestamp() * 1000)
    payload = letter.payload if own else None
    shot = Shot(exec_id, nominal, facts.now_ms, TriggerKind.replay, 1, payload)
    return start(state, effects, facts, shot)


def replay_orphan(cmd: ReplayDeadLetter, now_ms: int) -> list[Emit]:
    """Replay a dead letter of a job this partition does not have (deleted, or moved away):
    its execution runs once more as the letter holds it (target and payload), attempt 1; with
    no job there is nothing to retry it for, and history says so."""
    letter = cmd.letter
    if letter is None:
        return []
    now = ms_to_datetime(now_ms)
    again = letter.model_copy(
        update={
            "attempt": 1,
            "delivery": 1,
            "trigger": TriggerKind.replay,
            "due_at": now,
            "dispatched_at": now,
            "start_by": None,  # asked for now: no job left to say its max_event_age_ms
        }
    )
    record = HistoryRecord(
        tenant=letter.tenant,
        job_id=letter.job_id,
        decision=Decision.fired,
        at=now,
        execution_id=letter.execution_id,
        nominal_at=letter.nominal_at,
        due_at=now,
        attempt=1,
        reason=(
            f"replay {cmd.request_id} of a dead letter of a job that no longer exists: it runs "
            "once, as the letter holds it, and is not retried"
        ),
        details={"trigger": TriggerKind.replay.value, "lateness_ms": "0"},
    )
    return [Emit(Sink.executions, again), Emit(Sink.history, record)]


_EXECUTION_ID = attrgetter("execution_id")


def _quiet_success(state: JobState, outcome: ExecutionOutcome, facts: Facts) -> Effects | None:
    """`_apply_outcome` of the common outcome in one copy of the state, or None when it is not
    that outcome: the success of the current attempt of a run in `running`, not applied
    before, of a job with no run waiting (`buffered`), no `on_success` link and no
    `delete_after_completion`. Then all `_apply_outcome` does is take the run out of
    `running`, reset `failures_in_row` and note the attempt settled; the generic path made
    three copies of the state and several Python passes over its runs for it (a per-second
    job dispatched 30 s ahead has about 60). tests/scheduler/test_quiet_success.py checks
    both give the same effects for any state and outcome."""
    if outcome.status is not OutcomeStatus.succeeded or state.buffered:
        return None
    eid, attempt = outcome.execution_id, outcome.attempt
    running = state.running
    ids = list(map(_EXECUTION_ID, running))
    if eid not in ids:
        return None
    at = ids.index(eid)
    if running[at].attempt != attempt or f"{eid}#{attempt}" in state.finished:
        return None  # a stale or second outcome: history says so (the generic path)
    d = state.definition(facts.codec)
    if d.on_success or d.delete_after_completion:
        return None
    if ids.count(eid) == 1:
        rest = running[:at] + running[at + 1 :]
    else:  # each entry of its id, should there be two
        rest = tuple(r for r in running if r.execution_id != eid)
    finished, unsettled, mark = applied_fields(state, rest, eid, attempt)
    after = state.evolve(
        running=rest, failures_in_row=0, finished=finished, unsettled=unsettled, settled_ms=mark
    )
    return Effects(kept_payloads(after))


def _apply_outcome(state: JobState, outcome: ExecutionOutcome, facts: Facts) -> Effects:
    """Free the overlap slot, retry, or dead-letter. A success applied writes no history
    record (the outcome itself is on `outcomes`, one record per execution less); a retry, a
    dead letter or a cancel does. A late outcome of an earlier attempt, a lost lease, or a
    second outcome of one attempt is recorded in history, not applied."""
    effects = Effects(state)
    eid = outcome.execution_id
    ids = [r.execution_id for r in state.running]  # one pass; then index and count in C
    at = ids.index(eid) if eid in ids else None
    run = None if at is None else state.running[at]
    common = {
        "execution_id": outcome.execution_id,
        "attempt": outcome.attempt,
        "delivery": outcome.delivery,
        "nominal_at": outcome.nominal_at,
        "error": outcome.error,
    }
    if run is not None and outcome.attempt < run.attempt:
        effects.history(
            state,
            facts,
            Decision.failed if outcome.error else Decision.succeeded,
            reason=f"late outcome of attempt {outcome.attempt}; attempt {run.attempt} is current",
            details={"stale": "true"},
            **common,
        )
        return effects
    if outcome.status is OutcomeStatus.lease_lost:
        why = "worker lost its lease; the reaper redelivers the run (this outcome is not applied)"
        effects.history(
            state, facts, Decision.failed, reason=why, details={"stale": "true"}, **common
        )
        return effects
    if already_applied(state, outcome.execution_id, outcome.attempt):
        effects.history(
            state,
            facts,
            Decision.succeeded if outcome.status is OutcomeStatus.succeeded else Decision.failed,
            reason=f"another outcome of attempt {outcome.attempt} was applied first; not applied",
            details={"stale": "true"},
            **common,
        )
        return effects
    if at is not None and ids.count(eid) == 1:  # it leaves `running`
        state = state.evolve(running=state.running[:at] + state.running[at + 1 :])
    elif at is not None:  # each entry of its id, should there be two
        state = state.evolve(running=tuple(r for r in state.running if r.execution_id != eid))
    if outcome.status is OutcomeStatus.cancelled:
        effects.history(state, facts, Decision.cancelled, **common)
    elif outcome.status is not OutcomeStatus.succeeded:  # a success: the outcome is its record
        state = _failed(state, effects, outcome, facts)
    else:
        follow(state, effects, facts, outcome, SUCCESS)
        if state.failures_in_row:
            state = state.evolve(failures_in_row=0)
    state = drain_buffer(state, effects, facts)
    effects.state = kept_payloads(applied(state, outcome.execution_id, outcome.attempt))
    _delete_if_completed(effects.state, effects, facts)
    return effects


def _delete_if_completed(state: JobState, effects: Effects, facts: Facts) -> None:
    """`delete_after_completion`: once no occurrence is left and nothing runs, waits or is
    retried, the job deletes itself (a tombstone on its partition of `schedules`, applied as
    any delete when it is read back)."""
    d = state.definition(facts.codec)
    if not d.delete_after_completion or state.next_due_ms is not None:
        return
    if state.running or state.buffered or state.retries or state.backfills:
        return
    if any(a.due_ms > facts.now_ms for a in state.ahead):  # sent ahead, not due yet
        return
    effects.history(
        state,
        facts,
        Decision.completed,
        reason="no occurrence left and its last run ended: deleted (delete_after_completion)",
        details={"version": str(d.version), "deleted": "true"},
    )
    effects.out.append(Emit(Sink.schedules, Delete(d.key)))


def _failed(state: JobState, effects: Effects, outcome: ExecutionOutcome, facts: Facts) -> JobState:
    """Retry a retryable failure while attempts remain; otherwise dead-letter the execution."""
    d = state.definition(facts.codec)
    error = outcome.error or ErrorInfo(type=outcome.status.value, message=outcome.status.value)
    retryable = outcome.retryable or outcome.status is OutcomeStatus.timed_out
    if retryable and outcome.attempt < d.retry.max_attempts:
        delay = backoff_ms(state, facts, outcome.execution_id, outcome.attempt)
        due = facts.now_ms + delay
        effects.history(
            state,
            facts,
            Decision.retry_scheduled,
            execution_id=outcome.execution_id,
            attempt=outcome.attempt + 1,
            nominal_at=outcome.nominal_at,
            due_at=ms_to_datetime(due),
            error=error,
            reason=f"attempt {outcome.attempt} {outcome.status.value}: {error.message}",
            details={"backoff_ms": str(delay)},
        )
        nominal = int(outcome.nominal_at.timestamp() * 1000)
        pending = Pending(outcome.execution_id, nominal, due, outcome.attempt + 1, "retry")
        return state.evolve(retries=(*state.retries, pending))
    reason = DeadLetterReason.retries_exhausted if retryable else DeadLetterReason.not_retryable
    if error.type == REDELIVERY_CAP_ERROR:
        reason = DeadLetterReason.redelivery_cap
    nominal = int(outcome.nominal_at.timestamp() * 1000)
    trigger = TriggerKind.retry if outcome.attempt > 1 else TriggerKind.schedule
    if outcome.attempt == 1 and "@manual:" in outcome.execution_id:
        trigger = TriggerKind.manual
    due = int(outcome.due_at.timestamp() * 1000)
    payload = state.payload_of(outcome.execution_id)  # the run's, when it had its own
    shot = Shot(outcome.execution_id, nominal, due, trigger, outcome.attempt, payload)
    effects.out.append(
        Emit(
            Sink.dead_letter,
            DeadLetter(
                execution=execution(state, facts, shot),
                reason=reason,
                last_error=error,
                dead_lettered_at=ms_to_datetime(facts.now_ms),
            ),
        )
    )
    effects.history(
        state,
        facts,
        Decision.dead_lettered,
        execution_id=outcome.execution_id,
        attempt=outcome.attempt,
        nominal_at=outcome.nominal_at,
        error=error,
        reason=f"{reason.value} after attempt {outcome.attempt}: {error.message}",
    )
    follow(state, effects, facts, outcome, FAILURE)
    why = f"{reason.value} after attempt {outcome.attempt}: {error.message}"
    state = notify.notify(
        state, effects, facts, NotifyEvent.dead_lettered, outcome, reason=why, error=error
    )
    dead = Pending(outcome.execution_id, nominal, due, outcome.attempt, trigger.value)
    effects.dead_delta += 1 - max(0, len(state.dead) + 1 - DEAD_LIMIT)  # the oldest may drop out
    in_row = state.failures_in_row + 1
    state = state.evolve(dead=(*state.dead, dead)[-DEAD_LIMIT:], failures_in_row=in_row)
    if d.pause_after_failures is not None and in_row >= d.pause_after_failures and not state.paused:
        why = (
            f"paused after {in_row} runs in a row failed (pause_after_failures="
            f"{d.pause_after_failures}); the last, {outcome.execution_id}: {error.message}"
        )
        state = pause_job(state, effects, facts, why[:512])
        state = notify.notify(
            state, effects, facts, NotifyEvent.paused, outcome, reason=why, error=error
        )
    return state
