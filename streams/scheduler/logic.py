"""The scheduler's decisions, as pure functions: (state, input, now) -> (new state, records).

No Kafka, no clock, no storage here: the processor feeds inputs in and writes what comes out,
all inside one transaction. That is what makes fire-and-advance atomic and these rules testable
on a fake clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from enum import StrEnum

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    Backfill,
    CancelRun,
    Command,
    DeadLetter,
    DeadLetterReason,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    JitterMode,
    MissedRunMode,
    OnceSchedule,
    OutcomeStatus,
    OverlapPolicy,
    PauseJob,
    ReplayDeadLetter,
    ResumeJob,
    ScheduleDefinition,
    TriggerKind,
    TriggerNow,
    WireModel,
)
from kadence.timeengine.engine import Occurrence
from kadence.timeengine.identity import execution_id, manual_execution_id
from streams.scheduler.breaker import ALL_THROUGH, Gate
from streams.scheduler.state import (
    DEAD_LIMIT,
    RUNNING_LIMIT,
    Ahead,
    JobState,
    Pending,
    Running,
    active_runs,
    remember,
)

MISSED_LISTED = 1000
"""Missed occurrences get one history record each up to this many per catch-up; then a summary."""
AHEAD_LIMIT = 1000
"""At most this many occurrences of one job are dispatched ahead in one step (a per-second
`overlap=allow` job has 30 in a 30 s look-ahead)."""


class Sink(StrEnum):
    executions = "executions"
    history = "history"
    dead_letter = "dead_letter"


@dataclass(frozen=True, slots=True)
class Emit:
    sink: Sink
    record: WireModel


class Refused(Exception):  # noqa: N818 - a decision, not a failure
    """The input is not applied; the processor writes a `rejected` record with this reason."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Context:
    now_ms: int
    codec: Codec
    tzdb: str
    misfire_grace_ms: int = 30_000
    """An occurrence noticed later than this after its due time is late: the missed policy
    decides whether it still fires."""
    group_busy: bool = False
    """Another job of this job's concurrency group is running."""
    gate: Gate = ALL_THROUGH
    """The tenant's circuit breaker: whether retries may fire now."""
    ahead_ms: int = 0
    """Dispatch scheduled occurrences up to this long before they are due, when the decision
    to fire cannot depend on what happens until then (see `_may_go_early`)."""


@dataclass(frozen=True, slots=True)
class Shot:
    """One execution to dispatch now."""

    execution_id: str
    nominal_ms: int
    due_ms: int
    trigger: TriggerKind
    attempt: int = 1
    payload: bytes | None = None


@dataclass
class Result:
    state: JobState | None
    out: list[Emit] = field(default_factory=list)
    missed_listed: int = 0
    missed_unlisted: int = 0
    probe: str | None = None
    """A retry fired as the tenant breaker's half-open probe."""
    dead_delta: int = 0
    """Dead letters added (written) minus removed (replayed) by this step."""

    def history(self, state: JobState, ctx: Context, decision: Decision, **kw: object) -> None:
        d = state.definition(ctx.codec)
        self.out.append(
            Emit(
                Sink.history,
                HistoryRecord(
                    tenant=d.tenant,
                    job_id=d.job_id,
                    decision=decision,
                    at=ms_to_datetime(ctx.now_ms),
                    **kw,
                ),
            )
        )


def _settle(result: Result, ctx: Context) -> Result:
    """Every public step ends here: drop look-ahead entries that are now due, and decide
    whether the job's next occurrence may go out early (that sets its wake time)."""
    state = result.state
    if state is not None:
        ahead = tuple(a for a in state.ahead if a.due_ms > ctx.now_ms)
        early = ctx.ahead_ms if _may_go_early(state, ctx) else 0
        if ahead != state.ahead or early != state.early_ms:
            result.state = state.evolve(ahead=ahead, early_ms=early)
    return result


def _may_go_early(state: JobState, ctx: Context) -> bool:
    """Whether the next scheduled occurrence may be dispatched before it is due.

    Only when nothing between now and its due time can change the decision to fire it: not
    paused, no concurrency group, nothing buffered, and either overlap=allow or no run active.
    (Manual triggers and retries ignore the overlap policy anyway.) Otherwise it waits for the
    due time and the normal checks.
    """
    if ctx.ahead_ms <= 0 or state.paused or state.next_due_ms is None or state.buffered:
        return False
    d = state.definition(ctx.codec)
    if d.concurrency_key:
        return False
    return d.overlap is OverlapPolicy.allow or not _busy(state, ctx)


# --- definitions ---------------------------------------------------------------------------


def apply_definition(
    state: JobState | None,
    definition: ScheduleDefinition,
    raw: bytes,
    record_ts_ms: int,
    ctx: Context,
) -> Result:
    return _settle(_apply_definition(state, definition, raw, record_ts_ms, ctx), ctx)


def _apply_definition(
    state: JobState | None,
    definition: ScheduleDefinition,
    raw: bytes,
    record_ts_ms: int,
    ctx: Context,
) -> Result:
    """Create or update a job. A version not above the current one is refused.

    Occurrences the old version dispatched ahead and that are not due yet are revoked and the
    cursor goes back before them, so the new version decides about them.
    """
    result = Result(state)
    if state is not None:
        current = state.definition(ctx.codec).version
        if definition.version <= current:
            raise Refused(
                "stale_version",
                f"version {definition.version} of {definition.key} is not newer than {current}",
            )
        why = f"job changed to version {definition.version} before it was due"
        state = _revoke(state, result, ctx, why, rewind=True)
    if state is None:
        if isinstance(definition.schedule, OnceSchedule):
            cursor = int(definition.schedule.run_at.timestamp() * 1000) - 1
        else:
            cursor = record_ts_ms
        state = JobState(raw, cursor, cursor, None, None, ctx.tzdb)
    else:
        state = state.evolve(definition_bytes=raw)
    state = state.evolve(
        paused=definition.paused, paused_at_ms=ctx.now_ms if definition.paused else None
    )
    result.state = _advance_to(state, state.cursor_ms, ctx)
    return result


def _advance_to(state: JobState, cursor_ms: int, ctx: Context) -> JobState:
    occ = state.compiled(ctx.codec).next_after(cursor_ms)
    return state.evolve(
        cursor_ms=cursor_ms,
        next_nominal_ms=occ.nominal_ms if occ else None,
        next_due_ms=occ.due_ms if occ else None,
        tzdb=ctx.tzdb,
    )


def apply_tzdb(state: JobState, ctx: Context) -> Result:
    return _settle(_apply_tzdb(state, ctx), ctx)


def _apply_tzdb(state: JobState, ctx: Context) -> Result:
    """Recompute the next occurrence under the running tz database; report it if it moved."""
    new = _advance_to(state, state.cursor_ms, ctx)
    result = Result(new)
    if new.next_nominal_ms != state.next_nominal_ms:
        old = ms_to_datetime(state.next_nominal_ms).isoformat() if state.next_nominal_ms else "none"
        moved = ms_to_datetime(new.next_nominal_ms).isoformat() if new.next_nominal_ms else "none"
        result.history(
            new,
            ctx,
            Decision.rescheduled,
            nominal_at=ms_to_datetime(new.next_nominal_ms) if new.next_nominal_ms else None,
            reason=f"tz database {state.tzdb} -> {ctx.tzdb}: next occurrence {old} -> {moved}",
            details={"old_nominal_ms": str(state.next_nominal_ms), "tzdb": ctx.tzdb},
        )
    return result


def apply_delete(state: JobState, ctx: Context) -> Result:
    result = Result(None)
    _revoke(state, result, ctx, "job deleted before it was due", rewind=False)
    result.history(state, ctx, Decision.deleted, reason="job deleted; nothing fires after this")
    return result


# --- firing --------------------------------------------------------------------------------


def _execution(state: JobState, ctx: Context, shot: Shot) -> ExecutionRequested:
    d = state.definition(ctx.codec)
    return ExecutionRequested(
        execution_id=shot.execution_id,
        tenant=d.tenant,
        job_id=d.job_id,
        definition_version=d.version,
        attempt=shot.attempt,
        trigger=shot.trigger,
        nominal_at=ms_to_datetime(shot.nominal_ms),
        due_at=ms_to_datetime(shot.due_ms),
        dispatched_at=ms_to_datetime(ctx.now_ms),
        target=d.target,
        payload=d.payload if shot.payload is None else shot.payload,
        content_type=d.content_type,
        timeout_ms=d.timeout_ms,
        lease_ttl_ms=d.lease_ttl_ms,
        concurrency_key=d.concurrency_key,
    )


def _fire(state: JobState, result: Result, ctx: Context, shot: Shot) -> JobState:
    d = state.definition(ctx.codec)
    ex = _execution(state, ctx, shot)
    result.out.append(Emit(Sink.executions, ex))
    details = {"trigger": shot.trigger.value, "lateness_ms": str(max(0, ctx.now_ms - shot.due_ms))}
    if shot.due_ms > ctx.now_ms:
        details["ahead_ms"] = str(shot.due_ms - ctx.now_ms)
    result.history(
        state,
        ctx,
        Decision.fired,
        execution_id=shot.execution_id,
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        attempt=shot.attempt,
        details=details,
    )
    expires = max(ctx.now_ms, shot.due_ms) + d.timeout_ms + d.lease_ttl_ms
    running = tuple(r for r in state.running if r.expires_ms > ctx.now_ms)
    run = Running(shot.execution_id, shot.nominal_ms, shot.attempt, expires)
    return state.evolve(running=(*running, run), fired=state.fired + 1)


def _busy(state: JobState, ctx: Context) -> bool:
    return ctx.group_busy or any(r.expires_ms > ctx.now_ms for r in state.running)


def _fire_or_overlap(
    state: JobState, result: Result, ctx: Context, occ: Occurrence, trigger: TriggerKind
) -> JobState:
    """Fire a scheduled occurrence unless a run is active; then the overlap policy decides."""
    key = state.definition(ctx.codec).key
    exec_id = execution_id(key, occ.nominal_ms)
    policy = state.definition(ctx.codec).overlap
    nominal_at = ms_to_datetime(occ.nominal_ms)
    if active_runs(state, ctx.now_ms) >= RUNNING_LIMIT:
        why = f"{RUNNING_LIMIT} runs of this job are still running (the per-job limit)"
        return _skip(state, result, ctx, occ, exec_id=exec_id, why=why)
    if not _busy(state, ctx) or policy is OverlapPolicy.allow:
        return _fire(state, result, ctx, Shot(exec_id, occ.nominal_ms, occ.due_ms, trigger))
    if policy is OverlapPolicy.cancel_other:
        for run in state.running:
            why = f"overlap=cancel_other: {exec_id} is due"
            _stop_running(state, result, ctx, run, why)
        state = state.evolve(running=())
        return _fire(state, result, ctx, Shot(exec_id, occ.nominal_ms, occ.due_ms, trigger))
    limit = {OverlapPolicy.buffer_one: 1, OverlapPolicy.buffer_all: None}.get(policy, 0)
    max_buffered = state.definition(ctx.codec).max_buffered if limit is None else limit
    if len(state.buffered) < max_buffered:
        result.history(
            state,
            ctx,
            Decision.buffered,
            execution_id=exec_id,
            nominal_at=nominal_at,
            reason=f"overlap={policy.value}: previous run still running",
        )
        pending = Pending(exec_id, occ.nominal_ms, occ.due_ms, 1, trigger.value)
        return state.evolve(buffered=(*state.buffered, pending))
    why = f"overlap={policy.value}: previous run still running"
    return _skip(state, result, ctx, occ, exec_id=exec_id, why=why)


def _skip(
    state: JobState, result: Result, ctx: Context, occ: Occurrence, *, exec_id: str, why: str
) -> JobState:
    result.history(
        state,
        ctx,
        Decision.skipped_overlap,
        execution_id=exec_id,
        nominal_at=ms_to_datetime(occ.nominal_ms),
        reason=why,
    )
    return state.evolve(
        skipped=state.skipped + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
    )


def on_due(state: JobState, ctx: Context) -> Result:
    return _settle(_on_due(state, ctx), ctx)


def _on_due(state: JobState, ctx: Context) -> Result:
    """Fire everything of this job that is due at `ctx.now_ms`: retries, buffered, schedule;
    then dispatch ahead what may go early."""
    result = Result(state)
    state = _fire_retries(state, result, ctx)
    state = _drain_buffer(state, result, ctx)
    if not state.paused and state.next_due_ms is not None and state.next_due_ms <= ctx.now_ms:
        state = _catch_up(state, result, ctx)
    result.state = _dispatch_ahead(state, result, ctx)
    return result


def _dispatch_ahead(state: JobState, result: Result, ctx: Context) -> JobState:
    """Fire the occurrences due within the look-ahead, while the job may go early.

    Each keeps its due time (workers do not start before it) and is remembered until then,
    so a pause, change, delete or cancel before it is due can revoke it.
    """
    key = state.definition(ctx.codec).key
    compiled = state.compiled(ctx.codec)
    for _ in range(AHEAD_LIMIT):
        next_due = state.next_due_ms
        if next_due is None or next_due > ctx.now_ms + ctx.ahead_ms:
            break
        if not _may_go_early(state, ctx) or active_runs(state, ctx.now_ms) >= RUNNING_LIMIT:
            break
        occ, dst_skipped = compiled.next_with_skipped(state.cursor_ms)
        if occ is None:
            break
        for gone in dst_skipped:
            state = _dst_skipped(state, result, ctx, gone)
        before = state.cursor_ms
        shot = Shot(
            execution_id(key, occ.nominal_ms), occ.nominal_ms, occ.due_ms, TriggerKind.schedule
        )
        state = _fire(state, result, ctx, shot)
        ahead = Ahead(shot.execution_id, occ.nominal_ms, occ.due_ms, before)
        state = _advance_to(state.evolve(ahead=(*state.ahead, ahead)), occ.nominal_ms, ctx)
    return state


def _revoke(
    state: JobState,
    result: Result,
    ctx: Context,
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
        a for a in state.ahead if a.due_ms > ctx.now_ms and (only is None or a.execution_id == only)
    ]
    if not revoked:
        return state
    for a in revoked:
        result.out.append(_revocation(state, ctx, a.execution_id, a.due_ms, why))
        result.history(
            state,
            ctx,
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
        state = _advance_to(state, min(a.cursor_before_ms for a in revoked), ctx)
    return state


def _fire_retries(state: JobState, result: Result, ctx: Context) -> JobState:
    due = [p for p in state.retries if p.due_ms <= ctx.now_ms]
    if not due:
        return state
    waiting = tuple(p for p in state.retries if p.due_ms > ctx.now_ms)
    if not ctx.gate.closed:
        probe = due[:1] if ctx.gate.probe and result.probe is None else []
        held = tuple(replace(p, due_ms=ctx.gate.retry_at_ms) for p in due[len(probe) :])
        for p in held:
            result.history(
                state,
                ctx,
                Decision.circuit_open,
                execution_id=p.execution_id,
                attempt=p.attempt,
                nominal_at=ms_to_datetime(p.nominal_ms),
                due_at=ms_to_datetime(p.due_ms),
                reason=ctx.gate.reason,
            )
        waiting, due = waiting + held, probe
        if probe:
            result.probe = probe[0].execution_id
    state = state.evolve(retries=waiting)
    for p in due:
        shot = Shot(p.execution_id, p.nominal_ms, p.due_ms, TriggerKind.retry, p.attempt)
        state = _fire(state, result, ctx, shot)
    return state


def _drain_buffer(state: JobState, result: Result, ctx: Context) -> JobState:
    if not state.buffered or _busy(state, ctx):
        return state
    head, rest = state.buffered[0], state.buffered[1:]
    state = state.evolve(buffered=rest)
    shot = Shot(head.execution_id, head.nominal_ms, head.due_ms, TriggerKind(head.trigger))
    return _fire(state, result, ctx, shot)


def _catch_up(state: JobState, result: Result, ctx: Context) -> JobState:
    """Handle every occurrence due by now, following the missed-run policy for late ones."""
    state, due, cursor = _collect_due(state, result, ctx)
    policy = state.definition(ctx.codec).missed
    late = [o for o in due if ctx.now_ms - o.due_ms > ctx.misfire_grace_ms]
    fire: list[Occurrence] = due
    dropped: list[tuple[Occurrence, Decision, str]] = []
    if late and policy.mode is MissedRunMode.latest_once:
        fire = due[-1:]
        why = "late; missed.mode=latest_once fires only the most recent"
        dropped = [(o, Decision.coalesced, why) for o in due[:-1]]
    elif late and policy.mode is MissedRunMode.none:
        fire = [o for o in due if o not in late]
        dropped = [(o, Decision.missed, "late; missed.mode=none") for o in late]
    for occ, decision, why in dropped:
        state = _missed(state, result, ctx, occ, why, decision=decision)
    for occ in fire:
        trigger = TriggerKind.catch_up if occ in late else TriggerKind.schedule
        state = _fire_or_overlap(state, result, ctx, occ, trigger)
    if result.missed_unlisted:
        result.history(
            state,
            ctx,
            Decision.missed,
            reason=f"{result.missed_unlisted} more missed occurrences, not listed one by one",
            details={"unlisted": str(result.missed_unlisted)},
        )
    return _advance_to(state, cursor, ctx)


def _collect_due(
    state: JobState, result: Result, ctx: Context
) -> tuple[JobState, list[Occurrence], int]:
    """Occurrences due by now inside the catch-up window (at most max_catch_up, the latest).

    Older ones are missed. Their history records stop after MISSED_LISTED per catch-up, and
    the walk then jumps to the window instead of visiting each (a per-second job down a day).
    """
    compiled = state.compiled(ctx.codec)
    policy = state.definition(ctx.codec).missed
    window_start = ctx.now_ms - policy.catch_up_window_ms
    due: list[Occurrence] = []
    cursor = state.cursor_ms
    while True:
        occ, dst_skipped = compiled.next_with_skipped(cursor)
        if occ is None or occ.due_ms > ctx.now_ms:
            break  # (DST-skipped ones are reported when the cursor passes them)
        for gone in dst_skipped:
            state = _dst_skipped(state, result, ctx, gone)
        cursor = occ.nominal_ms
        if occ.due_ms < window_start:
            state = _missed(state, result, ctx, occ, "outside the catch-up window")
            if result.missed_listed == MISSED_LISTED:
                cursor = _jump_to_window(state, result, ctx, cursor, window_start)
            continue
        due.append(occ)
        if len(due) > policy.max_catch_up:
            state = _missed(state, result, ctx, due.pop(0), "over max_catch_up")
    return state, due, cursor


def _dst_skipped(state: JobState, result: Result, ctx: Context, occ: Occurrence) -> JobState:
    wall = occ.wall.strftime("%Y-%m-%d %H:%M:%S")
    result.history(
        state,
        ctx,
        Decision.skipped_dst,
        nominal_at=ms_to_datetime(occ.nominal_ms),
        reason=f"{wall} local does not exist (clocks spring forward); dst_gap=skip",
    )
    return state.evolve(
        skipped=state.skipped + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
    )


def _jump_to_window(
    state: JobState, result: Result, ctx: Context, cursor: int, window_start: int
) -> int:
    """Skip the rest of a long outage without visiting each occurrence (a per-second job down
    for a day has 86 400); one history record names the skipped range."""
    jump = state.compiled(ctx.codec).next_after(window_start - 1)
    if jump is None or jump.nominal_ms - 1 <= cursor:
        return cursor
    result.history(
        state,
        ctx,
        Decision.missed,
        reason=(
            f"every occurrence after {ms_to_datetime(cursor).isoformat()} and before "
            f"{ms_to_datetime(jump.nominal_ms).isoformat()} was missed (outside the catch-up "
            "window; not listed one by one)"
        ),
        details={"range_from": str(cursor), "range_to": str(jump.nominal_ms)},
    )
    return jump.nominal_ms - 1


def _missed(
    state: JobState,
    result: Result,
    ctx: Context,
    occ: Occurrence,
    why: str,
    *,
    decision: Decision = Decision.missed,
) -> JobState:
    """Count a missed occurrence; history lists the first MISSED_LISTED of one catch-up."""
    if result.missed_listed >= MISSED_LISTED:
        result.missed_unlisted += 1
    else:
        result.missed_listed += 1
        key = state.definition(ctx.codec).key
        result.history(
            state,
            ctx,
            decision,
            execution_id=execution_id(key, occ.nominal_ms),
            nominal_at=ms_to_datetime(occ.nominal_ms),
            due_at=ms_to_datetime(occ.due_ms),
            reason=why,
        )
    return state.evolve(
        missed=state.missed + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
    )


# --- commands ------------------------------------------------------------------------------


def apply_command(state: JobState, command: Command, ctx: Context) -> Result:
    return _settle(_apply_command(state, command, ctx), ctx)


def _apply_command(state: JobState, command: Command, ctx: Context) -> Result:
    """Trigger, backfill, cancel, pause, resume. A repeated request id changes nothing."""
    if command.request_id in state.request_ids:
        return Result(state)
    state = state.evolve(request_ids=remember(state.request_ids, command.request_id))
    result = Result(state)
    if isinstance(command, TriggerNow):
        _room_for(state, ctx, 1, "a trigger")
        key = state.definition(ctx.codec).key
        exec_id = manual_execution_id(key, command.request_id)
        shot = Shot(exec_id, ctx.now_ms, ctx.now_ms, TriggerKind.manual, 1, command.payload)
        result.state = _fire(state, result, ctx, shot)
    elif isinstance(command, PauseJob):
        state = _revoke(state, result, ctx, "job paused before it was due", rewind=True)
        result.state = state.evolve(paused=True, paused_at_ms=ctx.now_ms)
        result.history(state, ctx, Decision.paused, reason=command.reason or "paused")
    elif isinstance(command, ResumeJob):
        result.history(state, ctx, Decision.resumed, reason="resumed")
        state = state.evolve(paused=False, paused_at_ms=None)
        if state.next_due_ms is not None and state.next_due_ms <= ctx.now_ms:
            # what fell due while paused was missed, however short the pause: the job's
            # missed-run policy decides, with no grace for being "only a little late"
            state = _catch_up(state, result, replace(ctx, misfire_grace_ms=-1))
        result.state = state
    elif isinstance(command, Backfill):
        result.state = _backfill(state, result, command, ctx)
    elif isinstance(command, CancelRun):
        result.state = _cancel(state, result, command, ctx)
    elif isinstance(command, ReplayDeadLetter):
        result.state = _replay(state, result, command, ctx)
    return result


def _room_for(state: JobState, ctx: Context, runs: int, what: str) -> None:
    """Refuse a command that would take the job past `RUNNING_LIMIT` runs at once."""
    active = active_runs(state, ctx.now_ms)
    if active + runs > RUNNING_LIMIT:
        raise Refused(
            "too_many_runs",
            f"{what} would make {active + runs} runs of {state.definition(ctx.codec).key} at "
            f"once; a job has at most {RUNNING_LIMIT} (running now: {active}). Wait for runs "
            "to finish, or backfill a shorter range",
        )


def _backfill(state: JobState, result: Result, cmd: Backfill, ctx: Context) -> JobState:
    """Fire the occurrences with nominal time in [start, end) that the cursor has passed.

    Occurrences not yet reached are not backfilled (firing them now would be early).
    """
    compiled = state.compiled(ctx.codec)
    key = state.definition(ctx.codec).key
    end_ms = min(int(cmd.end.timestamp() * 1000), state.cursor_ms + 1)
    cursor = int(cmd.start.timestamp() * 1000) - 1
    undispatched = set(state.undispatched)
    backfilled = set(state.backfilled)
    plan: list[tuple[Occurrence, bool]] = []
    for _ in range(cmd.max_occurrences):
        occ = compiled.next_after(cursor)
        if occ is None or occ.nominal_ms >= end_ms:
            break
        cursor = occ.nominal_ms
        was_dispatched = occ.nominal_ms in backfilled or (
            state.created_cursor_ms < occ.nominal_ms <= state.cursor_ms
            and occ.nominal_ms not in undispatched
        )
        plan.append((occ, was_dispatched))
    runs = sum(1 for _, was in plan if cmd.force or not was)
    _room_for(state, ctx, runs, f"a backfill of {runs} occurrences")
    for occ, was_dispatched in plan:
        exec_id = execution_id(key, occ.nominal_ms)
        if was_dispatched and not cmd.force:
            result.history(
                state,
                ctx,
                Decision.skipped_dispatched,
                execution_id=exec_id,
                nominal_at=ms_to_datetime(occ.nominal_ms),
                reason=f"backfill {cmd.request_id}: already dispatched (force to run again)",
            )
            continue
        shot = Shot(exec_id, occ.nominal_ms, occ.due_ms, TriggerKind.backfill)
        state = _fire(state, result, ctx, shot)
        state = state.evolve(backfilled=remember(state.backfilled, occ.nominal_ms))
    return state


def _revocation(state: JobState, ctx: Context, execution_id: str, due_ms: int, why: str) -> Emit:
    d = state.definition(ctx.codec)
    revoked = ExecutionRevoked(
        execution_id=execution_id,
        tenant=d.tenant,
        job_id=d.job_id,
        definition_version=d.version,
        due_at=ms_to_datetime(due_ms),
        revoked_at=ms_to_datetime(ctx.now_ms),
        reason=why,
    )
    return Emit(Sink.executions, revoked)


def _stop_running(state: JobState, result: Result, ctx: Context, run: Running, why: str) -> None:
    """Ask the worker running it to stop: an ExecutionRevoked on its executions partition (the
    worker holding it cancels the invocation and reports `cancelled`)."""
    result.out.append(_revocation(state, ctx, run.execution_id, run.nominal_ms, why))
    result.history(state, ctx, Decision.cancel_requested, execution_id=run.execution_id, reason=why)


def _cancel(state: JobState, result: Result, cmd: CancelRun, ctx: Context) -> JobState:
    target = cmd.execution_id
    reason = cmd.reason or f"cancelled by request {cmd.request_id}"
    if any(a.execution_id == target and a.due_ms > ctx.now_ms for a in state.ahead):
        return _revoke(state, result, ctx, reason, rewind=False, only=target)
    kept_buffer = tuple(p for p in state.buffered if p.execution_id != target)
    kept_retries = tuple(p for p in state.retries if p.execution_id != target)
    if len(kept_buffer) != len(state.buffered) or len(kept_retries) != len(state.retries):
        result.history(state, ctx, Decision.cancelled, execution_id=target, reason=reason)
        return state.evolve(buffered=kept_buffer, retries=kept_retries)
    run = next((r for r in state.running if r.execution_id == target), None)
    if run is not None:
        _stop_running(state, result, ctx, run, reason)
        return state
    result.history(
        state,
        ctx,
        Decision.cancel_requested,
        execution_id=target,
        reason=f"{reason} (not pending or running here: nothing to cancel)",
    )
    return state


# --- outcomes ------------------------------------------------------------------------------


def _replay(state: JobState, result: Result, cmd: ReplayDeadLetter, ctx: Context) -> JobState:
    """Run dead letters again: same execution id, attempt 1, the retry policy afresh."""
    chosen = [p for p in state.dead if cmd.execution_id in (None, p.execution_id)]
    if not chosen:
        what = cmd.execution_id or "any dead letter"
        result.history(
            state,
            ctx,
            Decision.cancelled,
            execution_id=cmd.execution_id,
            reason=f"replay {cmd.request_id}: {what} is not among this job's recent dead letters",
        )
        return state
    _room_for(state, ctx, len(chosen), f"a replay of {len(chosen)} dead letters")
    ids = {p.execution_id for p in chosen}
    state = state.evolve(
        dead=tuple(p for p in state.dead if p.execution_id not in ids),
        finished=tuple(f for f in state.finished if f.rpartition("#")[0] not in ids),
    )
    result.dead_delta -= len(chosen)
    for p in chosen:
        shot = Shot(p.execution_id, p.nominal_ms, ctx.now_ms, TriggerKind.replay)
        state = _fire(state, result, ctx, shot)
    return state


def backoff_ms(state: JobState, ctx: Context, exec_id: str, failed_attempt: int) -> int:
    """Exponential backoff with full jitter, deterministic per (execution, attempt)."""
    retry = state.definition(ctx.codec).retry
    ceiling = min(
        retry.max_backoff_ms,
        int(retry.initial_backoff_ms * retry.multiplier ** (failed_attempt - 1)),
    )
    if retry.jitter is JitterMode.none or ceiling == 0:
        return ceiling
    digest = hashlib.blake2b(f"{exec_id}#{failed_attempt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (ceiling + 1)


def apply_outcome(state: JobState, outcome: ExecutionOutcome, ctx: Context) -> Result:
    return _settle(_apply_outcome(state, outcome, ctx), ctx)


def _apply_outcome(state: JobState, outcome: ExecutionOutcome, ctx: Context) -> Result:
    """Record how an attempt ended: free the overlap slot, retry, or dead-letter."""
    result = Result(state)
    run = next((r for r in state.running if r.execution_id == outcome.execution_id), None)
    done = f"{outcome.execution_id}#{outcome.attempt}"
    common = {
        "execution_id": outcome.execution_id,
        "attempt": outcome.attempt,
        "delivery": outcome.delivery,
        "nominal_at": outcome.nominal_at,
        "error": outcome.error,
    }
    if run is not None and outcome.attempt < run.attempt:
        result.history(
            state,
            ctx,
            Decision.failed if outcome.error else Decision.succeeded,
            reason=f"late outcome of attempt {outcome.attempt}; attempt {run.attempt} is current",
            details={"stale": "true"},
            **common,
        )
        return result
    if outcome.status is OutcomeStatus.lease_lost:
        why = "worker lost its lease; the reaper redelivers the run (this outcome is not applied)"
        result.history(state, ctx, Decision.failed, reason=why, details={"stale": "true"}, **common)
        return result
    if done in state.finished:
        result.history(
            state,
            ctx,
            Decision.succeeded if outcome.status is OutcomeStatus.succeeded else Decision.failed,
            reason=f"another outcome of attempt {outcome.attempt} was applied first; not applied",
            details={"stale": "true"},
            **common,
        )
        return result
    state = state.evolve(
        running=tuple(r for r in state.running if r.execution_id != outcome.execution_id),
        finished=remember(state.finished, done),
    )
    if outcome.status is OutcomeStatus.succeeded:
        result.history(state, ctx, Decision.succeeded, **common)
    elif outcome.status is OutcomeStatus.cancelled:
        result.history(state, ctx, Decision.cancelled, **common)
    else:
        state = _failed(state, result, outcome, ctx)
    result.state = _drain_buffer(state, result, ctx)
    return result


def _failed(state: JobState, result: Result, outcome: ExecutionOutcome, ctx: Context) -> JobState:
    d = state.definition(ctx.codec)
    error = outcome.error or ErrorInfo(type=outcome.status.value, message=outcome.status.value)
    retryable = outcome.retryable or outcome.status is OutcomeStatus.timed_out
    if retryable and outcome.attempt < d.retry.max_attempts:
        delay = backoff_ms(state, ctx, outcome.execution_id, outcome.attempt)
        due = ctx.now_ms + delay
        result.history(
            state,
            ctx,
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
    if error.type == "RedeliveryCap":
        reason = DeadLetterReason.redelivery_cap
    nominal = int(outcome.nominal_at.timestamp() * 1000)
    trigger = TriggerKind.retry if outcome.attempt > 1 else TriggerKind.schedule
    due = int(outcome.due_at.timestamp() * 1000)
    shot = Shot(outcome.execution_id, nominal, due, trigger, outcome.attempt)
    execution = _execution(state, ctx, shot)
    result.out.append(
        Emit(
            Sink.dead_letter,
            DeadLetter(
                execution=execution,
                reason=reason,
                last_error=error,
                dead_lettered_at=ms_to_datetime(ctx.now_ms),
            ),
        )
    )
    result.history(
        state,
        ctx,
        Decision.dead_lettered,
        execution_id=outcome.execution_id,
        attempt=outcome.attempt,
        nominal_at=outcome.nominal_at,
        error=error,
        reason=f"{reason.value} after attempt {outcome.attempt}: {error.message}",
    )
    dead = Pending(outcome.execution_id, nominal, due, outcome.attempt, trigger.value)
    result.dead_delta += 1 - max(0, len(state.dead) + 1 - DEAD_LIMIT)  # the oldest may drop out
    return state.evolve(dead=(*state.dead, dead)[-DEAD_LIMIT:])
