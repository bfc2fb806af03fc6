"""Backfill: run again the occurrences of a past range that the cursor has passed."""

from __future__ import annotations

from kadence.clock import ms_to_datetime
from kadence.models import Backfill, Decision, TriggerKind
from kadence.timeengine.engine import Occurrence
from kadence.timeengine.identity import execution_id
from streams.scheduler.dispatch import fire, room_for
from streams.scheduler.state import JobState, remember
from streams.scheduler.step import Effects, Facts, Shot


def backfill(state: JobState, effects: Effects, cmd: Backfill, facts: Facts) -> JobState:
    """Fire the occurrences with nominal time in [start, end) that the cursor has passed.

    Occurrences not yet reached are not backfilled (firing them now would be early). Those
    already dispatched are skipped unless the command forces them.
    """
    compiled = state.compiled(facts.codec)
    key = state.definition(facts.codec).key
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
    room_for(state, facts, runs, f"a backfill of {runs} occurrences")
    for occ, was_dispatched in plan:
        exec_id = execution_id(key, occ.nominal_ms)
        if was_dispatched and not cmd.force:
            effects.history(
                state,
                facts,
                Decision.skipped_dispatched,
                execution_id=exec_id,
                nominal_at=ms_to_datetime(occ.nominal_ms),
                reason=f"backfill {cmd.request_id}: already dispatched (force to run again)",
            )
            continue
        shot = Shot(exec_id, occ.nominal_ms, occ.due_ms, TriggerKind.backfill)
        state = fire(state, effects, facts, shot)
        state = state.evolve(backfilled=remember(state.backfilled, occ.nominal_ms))
    return state
