"""Commands on a job: trigger now, pause, resume, backfill, cancel a run, replay dead letters.
A repeated request id changes nothing; a refused command leaves a `refused` history record."""

from __future__ import annotations

from kadence.models import (
    Backfill,
    CancelRun,
    Command,
    Decision,
    HistoryRecord,
    PauseJob,
    ReplayDeadLetter,
    ResumeJob,
    TriggerKind,
    TriggerNow,
)
from kadence.models.commands import kadence_only
from kadence.models.records import ACTOR, KAFKA_ACTOR, MAX_DETAILS
from kadence.timeengine.identity import manual_execution_id
from streams.scheduler import backfill
from streams.scheduler.dispatch import keep_override, revoke, room_for, start, stop_running
from streams.scheduler.outcomes import replay
from streams.scheduler.paused import pause_job, skip_paused
from streams.scheduler.state import JobState, kept_payloads, remember
from streams.scheduler.step import Effects, Emit, Facts, Refused, Shot, keyed_history, settle

_CONTROL_NAMES: dict[type, str] = {
    ReplayDeadLetter: "a replay carrying its letter",
    TriggerNow: "a chain link's trigger (with caused_by)",
}


def refuse_control(command: object, topic: str, control_topic: str) -> None:
    """Refuse what only Kadence may say (docs/security.md, "Control records") arriving where
    anyone who may write `commands` could have forged it."""
    if kadence_only(command):
        what = _CONTROL_NAMES.get(type(command), type(command).__name__)
        raise Refused(
            "control_record",
            f"{what} is written by Kadence's own processes only, on {control_topic}; not "
            f"accepted on {topic}",
        )


def apply_command(state: JobState, command: Command, facts: Facts) -> Effects:
    """Apply `command`; when it is refused, the refusal carries a history record saying why.
    Every history record the command itself leads to names its actor (`signed`)."""
    try:
        effects = _apply_command(state, command, facts)
    except Refused as exc:
        raise refused(command, exc, facts.now_ms) from None
    effects.out[:] = signed(effects.out, actor_of(command))
    return settle(effects, facts)


def refused(command: Command, exc: Refused, now_ms: int) -> Refused:
    """`exc` for `command`, its records followed by a `refused` history record naming the
    command and its actor."""
    why = f"{type(command).__name__} {command.request_id} refused: {exc.reason}"
    told = keyed_history(command.key.encode(), Decision.refused, why, now_ms)
    out = signed([*exc.out, *([told] if told else [])], actor_of(command))
    return Refused(exc.code, exc.reason, out)


CHAIN_ACTOR = "chain"
"""The actor of a trigger a chain link sent (Kadence's own word, on scheduler-control)."""


def actor_of(command: Command) -> str | None:
    if isinstance(command, TriggerNow) and command.caused_by is not None:
        return CHAIN_ACTOR
    return command.actor


def signed(out: list[Emit], actor: str | None) -> list[Emit]:
    """`out` with each history record's details naming `actor` (`kafka`: a command written
    to Kafka directly, whose sender Kadence cannot tell; an API actor always has a `token:` or
    `jwt:` prefix, so the two never meet). A record whose details are full keeps them."""
    who = actor or KAFKA_ACTOR
    return [
        Emit(e.sink, _with_actor(e.record, who))
        if isinstance(e.record, HistoryRecord) and len(e.record.details) < MAX_DETAILS
        else e
        for e in out
    ]


def _with_actor(record: HistoryRecord, actor: str) -> HistoryRecord:
    return record.model_copy(update={"details": {**record.details, ACTOR: actor}})


def _apply_command(state: JobState, command: Command, facts: Facts) -> Effects:
    if command.request_id in state.request_ids:
        return Effects(state)
    state = state.evolve(request_ids=remember(state.request_ids, command.request_id))
    effects = Effects(state)
    if isinstance(command, TriggerNow):
        room_for(state, facts, 1, "a trigger")
        key = state.definition(facts.codec).key
        exec_id = manual_execution_id(key, command.request_id)
        now, payload = facts.now_ms, command.payload
        shot = Shot(exec_id, now, now, TriggerKind.manual, 1, payload, command.caused_by)
        state = start(state, effects, facts, shot)
        if command.payload is not None:
            state = keep_override(state, facts, exec_id, command.payload)
        effects.state = state
    elif isinstance(command, PauseJob):
        effects.state = pause_job(state, effects, facts, command.reason or "paused")
    elif isinstance(command, ResumeJob):
        if state.paused:  # what fell due while paused is skipped, not caught up
            state = skip_paused(state, effects, facts)
        effects.history(state, facts, Decision.resumed, reason=command.reason or "resumed")
        effects.state = state.evolve(paused=False, paused_at_ms=None, failures_in_row=0)
    elif isinstance(command, Backfill):
        effects.state = backfill.start(state, effects, command, facts)
    elif isinstance(command, CancelRun):
        effects.state = _cancel(state, effects, command, facts)
    elif isinstance(command, ReplayDeadLetter):
        effects.state = replay(state, effects, command, facts)
    return effects


def _cancel(state: JobState, effects: Effects, cmd: CancelRun, facts: Facts) -> JobState:
    """Cancel one run: revoke it if it went out ahead, drop it if it waits (buffered or a
    retry), or ask its worker to stop it if it runs."""
    target = cmd.execution_id
    reason = cmd.reason or f"cancelled by request {cmd.request_id}"
    if any(a.execution_id == target and a.due_ms > facts.now_ms for a in state.ahead):
        return revoke(state, effects, facts, reason, rewind=False, only=target)
    kept_buffer = tuple(p for p in state.buffered if p.execution_id != target)
    kept_retries = tuple(p for p in state.retries if p.execution_id != target)
    if len(kept_buffer) != len(state.buffered) or len(kept_retries) != len(state.retries):
        effects.history(state, facts, Decision.cancelled, execution_id=target, reason=reason)
        return kept_payloads(state.evolve(buffered=kept_buffer, retries=kept_retries))
    run = next((r for r in state.running if r.execution_id == target), None)
    if run is not None:
        stop_running(state, effects, facts, run, reason)
        return state
    effects.history(
        state,
        facts,
        Decision.cancel_requested,
        execution_id=target,
        reason=f"{reason} (not pending or running here: nothing to cancel)",
    )
    return state
