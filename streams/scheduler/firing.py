"""A job's wake time has come: fire its due retries (through the tenant's circuit breaker),
its buffered occurrence, its due schedule (catching up), then dispatch ahead what may go
early. And when its concurrency group has become free, start what waits for it."""

from __future__ import annotations

from dataclasses import replace

from kadence.models import ExecutionRequested, TriggerKind
from kadence.timeengine.identity import execution_id
from streams.scheduler import backfill
from streams.scheduler.catchup import catch_up, dst_skipped
from streams.scheduler.dispatch import (
    circuit_held,
    drain_buffer,
    fire,
    group_reason,
    over_tenant_cap,
    start,
    wait,
)
from streams.scheduler.entries import Ahead
from streams.scheduler.fired import series_history
from streams.scheduler.paused import skip_paused
from streams.scheduler.series import fire_series
from streams.scheduler.state import JobState, at_running_limit
from streams.scheduler.step import (
    Effects,
    Facts,
    Shot,
    Sink,
    advance_to,
    group_blocked,
    may_go_early,
    settle,
)

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


def on_group_free(state: JobState, facts: Facts) -> Effects:
    """The job's concurrency group has no run and it is this job's turn: start its oldest
    waiting run, or else the next run of its backfill."""
    effects = Effects(state)
    state = drain_buffer(state, effects, facts)
    started = any(
        e.sink is Sink.executions and isinstance(e.record, ExecutionRequested) for e in effects.out
    )
    if not started and state.backfills and state.backfills[0].wake_ms > facts.now_ms:
        head = state.backfills[0].advanced(wake_ms=facts.now_ms)
        state = state.evolve(backfills=(head, *state.backfills[1:]))
    if not started:
        state = backfill.step(state, effects, facts)
    effects.state = state
    return settle(effects, facts)


def _fire_retries(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Fire the retries due now. While the tenant's circuit is open they wait (each one says
    so in history); half-open, the first fires as the probe. In a concurrency group that is
    running a run they wait for the group (the breaker decides when they leave the buffer)."""
    due = [p for p in state.retries if p.due_ms <= facts.now_ms]
    if not due:
        return state
    waiting = tuple(p for p in state.retries if p.due_ms > facts.now_ms)
    if group_blocked(state, facts):
        state = state.evolve(retries=waiting)
        why = group_reason(state, facts)
        for p in due:
            payload = state.payload_of(p.execution_id)
            shot = Shot(
                p.execution_id, p.nominal_ms, p.due_ms, TriggerKind.retry, p.attempt, payload
            )
            state = wait(state, effects, facts, shot, why)
        return state
    gate = facts.gate
    if not gate.closed:
        probe = due[:1] if gate.probe and effects.probe is None else []
        held = tuple(replace(p, due_ms=gate.retry_at_ms) for p in due[len(probe) :])
        for p in held:
            circuit_held(state, effects, facts, p, gate.reason)
        waiting, due = waiting + held, probe
        if probe:
            effects.probe = probe[0].execution_id
    state = state.evolve(retries=waiting)
    for p in due:
        payload = state.payload_of(p.execution_id)  # a triggered run's own payload, if any
        shot = Shot(p.execution_id, p.nominal_ms, p.due_ms, TriggerKind.retry, p.attempt, payload)
        state = start(state, effects, facts, shot)
    return state


def _dispatch_ahead(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Fire the occurrences due within the look-ahead, while the job may go early.

    Each keeps its due time (workers do not start before it) and is remembered until then,
    so a pause, change, delete or cancel before it is due can revoke it. A steady job's go
    out in one pass first (series.py); this loop fires the others, and goes on where that
    pass stopped.
    """
    key = state.definition(facts.codec).key
    compiled = state.compiled(facts.codec)
    shots: list[Shot] = []  # their `fired` records: one per steady series (fired.py)
    state = fire_series(state, effects, facts, shots, AHEAD_LIMIT)
    for _ in range(AHEAD_LIMIT - len(shots)):
        next_due = state.next_due_ms
        if next_due is None or next_due > facts.now_ms + facts.ahead_ms:
            break
        if not may_go_early(state, facts) or at_running_limit(state, facts.now_ms):
            break
        if state.held_ms is not None or over_tenant_cap(state, effects, facts, next_due):
            break  # the tenant's caps: decided at the due time (catch_up), not ahead
        occ, skipped = compiled.next_with_skipped(state.cursor_ms)
        if occ is None:
            break
        if skipped:  # history in order: the runs fired so far, then the skip
            series_history(state, effects, facts, shots)
            shots = []
        for gone in skipped:
            state = dst_skipped(state, effects, facts, gone)
        before = state.cursor_ms
        shot = Shot(
            execution_id(key, occ.nominal_ms), occ.nominal_ms, occ.due_ms, TriggerKind.schedule
        )
        state = fire(state, effects, facts, shot, history=False)
        shots.append(shot)
        ahead = Ahead(shot.execution_id, occ.nominal_ms, occ.due_ms, before)
        state = advance_to(state, occ.nominal_ms, facts, ahead=(*state.ahead, ahead))
    series_history(state, effects, facts, shots)
    return state
