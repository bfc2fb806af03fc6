"""Catching up: every occurrence due by now, the late ones under the job's missed-run policy,
the ones outside the catch-up window counted as missed (a long outage summarised, not walked),
and wall-clock times a DST gap skipped."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.models import Decision, MissedRunMode, TriggerKind
from kadence.timeengine.engine import Occurrence
from kadence.timeengine.identity import execution_id
from streams.scheduler.dispatch import fire_or_overlap, hold, over_tenant_cap
from streams.scheduler.state import GAPS_LIMIT, JobState, remember
from streams.scheduler.step import Effects, Facts, advance_to

HELD_REMEMBERED_MS = 60_000
"""A job that waited for its tenant's caps keeps `held_ms` this long after it ran again: a job
that waits again meanwhile is not told `throttled` again (under a flood, once a minute per job,
not once per run), does not go out ahead, and sums up what it passed over."""
MISSED_LISTED = 1000
"""Missed occurrences get one history record each up to this many per catch-up; then a summary."""


def catch_up(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Handle every occurrence due by now, following the missed-run policy for late ones."""
    state, due, cursor = _collect_due(state, effects, facts)
    policy = state.definition(facts.codec).missed
    late = [o for o in due if facts.now_ms - o.due_ms > facts.misfire_grace_ms]
    fire: list[Occurrence] = due
    dropped: list[tuple[Occurrence, Decision, str]] = []
    if state.held_ms is not None and len(due) > 1 and policy.mode is not MissedRunMode.all:
        state, fire = _held_behind(state, effects, facts, due)
    elif late and policy.mode is MissedRunMode.latest_once:
        fire = due[-1:]
        why = "late; missed.mode=latest_once fires only the most recent"
        dropped = [(o, Decision.coalesced, why) for o in due[:-1]]
    elif late and policy.mode is MissedRunMode.none:
        fire = [o for o in due if o not in late]
        dropped = [(o, Decision.missed, "late; missed.mode=none") for o in late]
    for occ, decision, why in dropped:
        state = _missed(state, effects, facts, occ, why, decision=decision)
    held: tuple[int, str] | None = None
    for occ in fire:
        if state.runs_left(facts.codec) == 0:
            break  # max_runs reached: the job fires no more (its `completed` record says so)
        over = over_tenant_cap(state, effects, facts, occ.due_ms)
        if over is not None:
            held = (occ.nominal_ms, over)
            break
        trigger = TriggerKind.catch_up if occ in late else TriggerKind.schedule
        state = fire_or_overlap(state, effects, facts, occ, trigger)
    if effects.missed_unlisted:
        effects.history(
            state,
            facts,
            Decision.missed,
            reason=f"{effects.missed_unlisted} more missed occurrences, not listed one by one",
            details={"unlisted": str(effects.missed_unlisted)},
        )
    if held is not None:
        return hold(state, effects, facts, *held)
    state = advance_to(state, cursor, facts)
    if state.held_ms is not None and facts.now_ms - state.held_ms > HELD_REMEMBERED_MS:
        state = state.evolve(held_ms=None)  # a new wait will be told again
    return state


def _held_behind(
    state: JobState, effects: Effects, facts: Facts, due: list[Occurrence]
) -> tuple[JobState, list[Occurrence]]:
    """The job waited for its tenant's caps and more than one occurrence fell due meanwhile:
    it is behind because of its tenant, not an outage, so its missed-run policy applies at
    once (latest_once, none: only the most recent fires) and the ones passed over are told in
    one history record (naming the first, the one that began to wait), not one each: a tenant
    flooding past its cap would otherwise make the scheduler write a record per dropped
    occurrence. `missed.mode=all` fires them in turn."""
    passed, fire = due[:-1], due[-1:]
    policy = state.definition(facts.codec).missed
    for occ in passed:
        state = state.evolve(
            missed=state.missed + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
        )
    decision = Decision.coalesced if policy.mode is MissedRunMode.latest_once else Decision.missed
    effects.history(
        state,
        facts,
        decision,
        execution_id=execution_id(state.definition(facts.codec).key, passed[0].nominal_ms),
        nominal_at=ms_to_datetime(passed[0].nominal_ms),
        reason=(
            f"{len(passed)} occurrences from {ms_to_datetime(passed[0].nominal_ms).isoformat()} "
            f"to {ms_to_datetime(passed[-1].nominal_ms).isoformat()} fell due while the job "
            f"waited for its tenant's caps; missed.mode={policy.mode.value} fires only the most "
            "recent"
        ),
        details={"occurrences": str(len(passed))},
    )
    return state, fire


def _collect_due(
    state: JobState, effects: Effects, facts: Facts
) -> tuple[JobState, list[Occurrence], int]:
    """Occurrences due by now inside the catch-up window (at most max_catch_up, the latest).

    Older ones are missed. Their history records stop after MISSED_LISTED per catch-up, and
    the walk then jumps to the window instead of visiting each (a per-second job down a day).
    """
    compiled = state.compiled(facts.codec)
    policy = state.definition(facts.codec).missed
    window_start = facts.now_ms - policy.catch_up_window_ms
    due: list[Occurrence] = []
    cursor = state.cursor_ms
    while True:
        occ, dst_skipped_ones = compiled.next_with_skipped(cursor)
        if occ is None or occ.due_ms > facts.now_ms:
            break  # (DST-skipped ones are reported when the cursor passes them)
        for gone in dst_skipped_ones:
            state = dst_skipped(state, effects, facts, gone)
        cursor = occ.nominal_ms
        if occ.due_ms < window_start:
            state = _missed(state, effects, facts, occ, "outside the catch-up window")
            if effects.missed_listed == MISSED_LISTED:
                jumped = _jump_to_window(state, effects, facts, cursor, window_start)
                if jumped != cursor:  # a backfill may still fire what the jump passed over
                    gap = (cursor, jumped + 1)
                    state = state.evolve(gaps=(*state.gaps, gap)[-GAPS_LIMIT:])
                cursor = jumped
            continue
        due.append(occ)
        if len(due) > policy.max_catch_up:
            state = _missed(state, effects, facts, due.pop(0), "over max_catch_up")
    return state, due, cursor


def dst_skipped(state: JobState, effects: Effects, facts: Facts, occ: Occurrence) -> JobState:
    """Report a local time that does not exist (clocks spring forward) and count it skipped."""
    wall = occ.wall.strftime("%Y-%m-%d %H:%M:%S")
    effects.history(
        state,
        facts,
        Decision.skipped_dst,
        nominal_at=ms_to_datetime(occ.nominal_ms),
        reason=f"{wall} local does not exist (clocks spring forward); dst_gap=skip",
    )
    return state.evolve(
        skipped=state.skipped + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
    )


def _jump_to_window(
    state: JobState, effects: Effects, facts: Facts, cursor: int, window_start: int
) -> int:
    """Skip the rest of a long outage without visiting each occurrence (a per-second job down
    for a day has 86 400); one history record names the skipped range."""
    jump = state.compiled(facts.codec).next_after(window_start - 1)
    if jump is None or jump.nominal_ms - 1 <= cursor:
        return cursor
    effects.history(
        state,
        facts,
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
    effects: Effects,
    facts: Facts,
    occ: Occurrence,
    why: str,
    *,
    decision: Decision = Decision.missed,
) -> JobState:
    """Count a missed occurrence; history lists the first MISSED_LISTED of one catch-up."""
    if effects.missed_listed >= MISSED_LISTED:
        effects.missed_unlisted += 1
    else:
        effects.missed_listed += 1
        key = state.definition(facts.codec).key
        effects.history(
            state,
            facts,
            decision,
            execution_id=execution_id(key, occ.nominal_ms),
            nominal_at=ms_to_datetime(occ.nominal_ms),
            due_at=ms_to_datetime(occ.due_ms),
            reason=why,
        )
    return state.evolve(
        missed=state.missed + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
    )
