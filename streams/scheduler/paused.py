"""A paused job skips: each occurrence that falls due while it is paused is recorded
`skipped_paused` at its due time (the job still wakes for it) and is never caught up on resume.
A backfill of the window runs them later if wanted (they are remembered as undispatched).
After a long scheduler outage the first PAUSED_LISTED are listed one by one and the rest are
summarised in one range record (kept as a gap, so a backfill still finds them)."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.models import Decision
from kadence.timeengine.identity import execution_id
from streams.scheduler.catchup import catch_up, dst_skipped
from streams.scheduler.dispatch import revoke
from streams.scheduler.state import GAPS_LIMIT, JobState, remember
from streams.scheduler.step import Effects, Facts, advance_to

PAUSED_LISTED = 100
"""Occurrences recorded one by one per step; more (a scheduler outage) get one range record."""


def skip_paused(state: JobState, effects: Effects, facts: Facts) -> JobState:
    """Record every occurrence due by now as skipped because the job is paused."""
    if state.next_due_ms is None or state.next_due_ms > facts.now_ms:
        return state
    compiled = state.compiled(facts.codec)
    key = state.definition(facts.codec).key
    since = ms_to_datetime(state.paused_at_ms or facts.now_ms).isoformat()
    cursor = state.cursor_ms
    listed = 0
    while True:
        occ, gone = compiled.next_with_skipped(cursor)
        if occ is None or occ.due_ms > facts.now_ms:
            break
        for g in gone:
            state = dst_skipped(state, effects, facts, g)
        if listed == PAUSED_LISTED:
            nxt = compiled.next_after(facts.now_ms)
            end = nxt.nominal_ms if nxt is not None else facts.now_ms + 1
            effects.history(
                state,
                facts,
                Decision.skipped_paused,
                reason=(
                    f"every occurrence after {ms_to_datetime(cursor).isoformat()} and before "
                    f"{ms_to_datetime(end).isoformat()} was skipped: the job is paused (since "
                    f"{since}); not listed one by one"
                ),
                details={"range_from": str(cursor), "range_to": str(end)},
            )
            state = state.evolve(gaps=(*state.gaps, (cursor, end))[-GAPS_LIMIT:])
            cursor = end - 1
            break
        listed += 1
        effects.history(
            state,
            facts,
            Decision.skipped_paused,
            execution_id=execution_id(key, occ.nominal_ms),
            nominal_at=ms_to_datetime(occ.nominal_ms),
            due_at=ms_to_datetime(occ.due_ms),
            reason=f"the job is paused (since {since}); backfill runs it if wanted",
        )
        state = state.evolve(
            skipped=state.skipped + 1, undispatched=remember(state.undispatched, occ.nominal_ms)
        )
        cursor = occ.nominal_ms
    return advance_to(state, cursor, facts)


def pause_job(state: JobState, effects: Effects, facts: Facts, reason: str) -> JobState:
    """Pause now (a PauseJob, or the job's own `pause_after_failures`): what was already due
    is decided as usual first, runs sent ahead and not yet due are revoked, and a `paused`
    history record carries `reason`."""
    if not state.paused and state.next_due_ms is not None and state.next_due_ms <= facts.now_ms:
        state = catch_up(state, effects, facts)  # due before the pause: decided as usual
    state = revoke(state, effects, facts, "job paused before it was due", rewind=True)
    effects.history(state, facts, Decision.paused, reason=reason)
    return state.evolve(paused=True, paused_at_ms=facts.now_ms)
