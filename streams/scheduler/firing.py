"""A job's wake time has come: fire its due retries (through the tenant's circuit breaker),
its buffered occurrence, its due schedule (catching up), then dispatch ahead what may go
early."""

from __future__ import annotations

from dataclasses import replace

from kadence.clock import ms_to_datetime
from kadence.models import Decision, TriggerKind
from kadence.timeengine.identity import execution_id
from streams.scheduler import backfill
from streams.scheduler.catchup import catch_up, dst_skipped
from streams.scheduler.dispatch import drain_buffer, fire
from streams.scheduler.paused import skip_paused
from streams.scheduler.state import RUNNING_LIMIT, Ahead, JobState, active_runs
from streams.scheduler.step import Effects, Facts, Shot, advance_to, may_go_early, settle

AHEAD_LIMIT = 1000
"""At most this many occurrences of one job are dispatched ahead in one step (a per-second
`overlap=allow` job has 30 in a 30 s look-ahead)."""


def on_due(state: JobState, facts: Facts) -> Effects:
    """Fire everything of this job that is due at `facts.now_ms`: retries, buffered, backfill,
    schedule (a paused job records it skipped instead); then dispatch ahead what may go early."""
    effects = Effects(state)
    state = _fire_retries(state, effects, facts)
    state = drain_buffer(state, effects, facts)
    state = backfill.step(state, effects, facts)
    if state.paused:
        state = skip_paused(state, effects, facts)
    elif state.next_due_ms is not None and state.next_due_ms <= facts.now_ms:
        state = catch_up(state, effects, facts)
    effects.state = _dispatch_ahead(state, effects, facts)
    if effects.probe is not None:
        d = state.definition(facts.codec)
        wait = d.timeout_ms + d.lease_ttl_ms + facts.breaker_cfg.cooldown_ms
        effects.breaker = facts.breaker.probing(effects.probe, facts.now_ms, wait)
    return settle(effects, facts)


def _fire_retries(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Fire the retries due now. While the tenant's circuit is open they wait (each one says
    so in history); half-open, the first fires as the probe."""
    due = [p for p in state.retries if p.due_ms <= facts.now_ms]
    if not due:
        return state
    waiting = tuple(p for p in state.retries if p.due_ms > facts.now_ms)
    gate = facts.gate
    if not gate.closed:
        probe = due[:1] if gate.probe and effects.probe is None else []
        held = tuple(replace(p, due_ms=gate.retry_at_ms) for p in due[len(probe) :])
        for p in held:
            effects.history(
                state,
                facts,
                Decision.circuit_open,
                execution_id=p.execution_id,
                attempt=p.attempt,
                nominal_at=ms_to_datetime(p.nominal_ms),
                due_at=ms_to_datetime(p.due_ms),
                reason=gate.reason,
            )
        waiting, due = waiting + held, probe
        if probe:
            effects.probe = probe[0].execution_id
    state = state.evolve(retries=waiting)
    for p in due:
        payload = state.payload_of(p.execution_id)  # a triggered run's own payload, if any
        shot = Shot(p.execution_id, p.nominal_ms, p.due_ms, TriggerKind.retry, p.attempt, payload)
        state = fire(state, effects, facts, shot)
    return state


def _dispatch_ahead(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Fire the occurrences due within the look-ahead, while the job may go early.

    Each keeps its due time (workers do not start before it) and is remembered until then,
    so a pause, change, delete or cancel before it is due can revoke it.
    """
    key = state.definition(facts.codec).key
    compiled = state.compiled(facts.codec)
    for _ in range(AHEAD_LIMIT):
        next_due = state.next_due_ms
        if next_due is None or next_due > facts.now_ms + facts.ahead_ms:
            break
        if not may_go_early(state, facts) or active_runs(state, facts.now_ms) >= RUNNING_LIMIT:
            break
        occ, skipped = compiled.next_with_skipped(state.cursor_ms)
        if occ is None:
            break
        for gone in skipped:
            state = dst_skipped(state, effects, facts, gone)
        before = state.cursor_ms
        shot = Shot(
            execution_id(key, occ.nominal_ms), occ.nominal_ms, occ.due_ms, TriggerKind.schedule
        )
        state = fire(state, effects, facts, shot)
        ahead = Ahead(shot.execution_id, occ.nominal_ms, occ.due_ms, before)
        state = advance_to(state.evolve(ahead=(*state.ahead, ahead)), occ.nominal_ms, facts)
    return state
