"""A steady job's runs dispatched ahead in one pass.

A per-second job wakes every 22 s and sends out 22 runs (30 s of look-ahead, refilled once a
quarter is left: step.REFILL_WHEN_LEFT).
Run by run (`firing._dispatch_ahead`) each costs two copies of the job's state (the run fired,
the cursor moved), a pass over its ~45 remembered runs for expired ones, and its tenant's caps
looked at twice, although for most jobs nothing of that can change between two runs of one
wake. `fire_series` fires them with the state's fields kept in local lists and copies the state
once at the end.

It fires only while the checks of the run-by-run loop are known to pass for the job as a whole
(`steady`): look-ahead on, not paused, nothing buffered, not held for its tenant's caps,
overlap `allow`, no concurrency group, no `max_runs`; the tenant's caps it asks run by run, as
the loop does. It stops, leaving the state exactly as the run-by-run loop would have left it
there, before a run that could go otherwise: one the tenant's caps leave no room for, one with
occurrences skipped by a DST gap before it, one that would reach the job's `RUNNING_LIMIT`.
The run-by-run loop goes on from there (tests/scheduler/test_series.py checks that both give
the same state and records for any job, caps and time).
"""

from __future__ import annotations

from kadence.models import OverlapPolicy, TriggerKind
from kadence.timeengine.identity import execution_id
from streams.scheduler.entries import Ahead, Running
from streams.scheduler.requested import SeriesRun, SeriesRuns
from streams.scheduler.settled import dropped
from streams.scheduler.state import RUNNING_LIMIT, JobState
from streams.scheduler.step import URGENT_WITHIN_MS, Effects, Facts, Shot

_SCHEDULE = TriggerKind.schedule


def steady(state: JobState, facts: Facts) -> bool:
    """Whether nothing but the look-ahead's end, the tenant's caps, a DST gap and the job's run
    limit can stop its next runs going out ahead (`may_go_early` passes for every one while the
    caps have room)."""
    if facts.ahead_ms <= 0 or state.paused or state.buffered or state.held_ms is not None:
        return False
    d = state.definition(facts.codec)
    return d.overlap is OverlapPolicy.allow and d.concurrency_key is None and d.max_runs is None


def fire_series(
    state: JobState, effects: Effects, facts: Facts, shots: list[Shot], limit: int
) -> JobState:
    """Fire up to `limit` of the job's next occurrences that are due within the look-ahead, as
    `dispatch.fire` fires each (without its `fired` record: `shots` gets them, for one per
    series), while the job is `steady`; returns the state after them."""
    until = facts.now_ms + facts.ahead_ms
    if limit <= 0 or state.next_due_ms is None or state.next_due_ms > until:
        return state
    if not steady(state, facts) or len(state.running) >= RUNNING_LIMIT:
        return state
    compiled = state.compiled(facts.codec)
    occ, skipped = compiled.next_with_skipped(state.cursor_ms)
    if occ is None or skipped:
        return state
    d = state.definition(facts.codec)
    now = facts.now_ms
    running, unsettled = list(state.running), state.unsettled
    expired = [r for r in running if r.expires_ms <= now]
    if expired:  # as the first `fire` drops them; runs it adds expire after now
        running = [r for r in running if r.expires_ms > now]
        unsettled = dropped(state, expired)
    ahead = list(state.ahead)
    keep_ms = d.timeout_ms + d.lease_ttl_ms
    key, cursor, scheduled, out = d.key, state.cursor_ms, effects.scheduled, effects.out
    load, started = facts.tenant, effects.started
    capped = bool(load.caps.fires_per_s or load.caps.in_flight)
    runs = SeriesRuns(state, facts)
    fired = 0
    while True:
        nominal, due = occ.nominal_ms, occ.due_ms
        if capped and load.why_not(due, scheduled, started + fired, mine=False) is not None:
            break  # (`over_tenant_cap`; `may_go_early`'s look passes when this one does)
        eid = execution_id(key, nominal)  # the job's own id for the instant: `derived`
        shot = Shot(eid, nominal, due, _SCHEDULE)
        out.append(SeriesRun(runs, shot))  # its record made only if asked for
        if due - now < URGENT_WITHIN_MS:
            effects.urgent = True
        second = max(due, now) // 1000
        scheduled[second] = scheduled.get(second, 0) + 1
        running.append(Running(eid, nominal, 1, max(now, due) + keep_ms, True))
        ahead.append(Ahead(eid, nominal, due, cursor, True))
        shots.append(shot)
        fired += 1
        cursor = nominal
        occ, skipped = compiled.next_with_skipped(cursor)
        if occ is None or occ.due_ms > until or skipped or fired == limit:
            break
        if len(running) >= RUNNING_LIMIT:
            break
    if not fired:
        return state
    effects.started += fired
    return state.evolve(
        running=tuple(running),
        unsettled=unsettled,
        ahead=tuple(ahead),
        fired=state.fired + fired,
        runs_done=state.runs_done + fired,
        cursor_ms=cursor,
        next_nominal_ms=occ.nominal_ms if occ is not None else None,
        next_due_ms=occ.due_ms if occ is not None else None,
        tzdb=facts.tzdb,
    )
