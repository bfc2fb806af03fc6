"""An outcome that changes nothing but its job's runs is not written on its own.

Most outcomes are successes of runs that nothing else waits for: applying one takes the run out
of the job's `running` and notes it settled (settled.py), and that is all. Writing the job's
whole state for it was a RocksDB write, a changelog record (568 bytes) and the state's encoding
per execution, more than a third of the scheduler's work per run. Such an outcome is *quiet*
(`quiet`): it produced no record, started nothing, changed no timer, and its job is in no
concurrency group (whose index the write would change) and does not delete itself once
complete. Its new state is kept in memory and deferred
(streams/runtime/deferred.py): the job's next write (its next fire, a command, a failure)
carries it, or the runner writes it once it has waited `write_behind_ms`.

After a crash, an abort or a rebalance, the partition's next owner reads `outcomes` again from
the stored replay point; `replay` applies each success whose run the stored state still lists as
running, exactly as it was applied the first time (the same `apply_outcome`), and writes or
produces nothing else: its history, breaker count, metrics and the tenant's count of runs in
progress (`~inflight/<tenant>`, changed and written with the outcome's transaction) were written
the first time.
A success the stored state already covers (a later write carried it) finds its run gone and is
skipped. So the job's state after a restore is the state it had, and the same runs follow.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kadence.models import ExecutionOutcome, OutcomeStatus
from kadence.topics import OUTCOMES
from streams.runtime.context import ProcessorContext
from streams.runtime.records import InputRecord
from streams.scheduler import outcomes
from streams.scheduler.settled import already_applied
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects

if TYPE_CHECKING:
    from streams.scheduler.processor import SchedulerProcessor

log = logging.getLogger(__name__)


def quiet(proc: SchedulerProcessor, before: JobState, effects: Effects) -> bool:
    """Whether the step changed nothing but the job's own runs and settled outcomes."""
    after = effects.state
    if after is None or effects.out or effects.urgent or effects.started:
        return False
    if effects.dead_delta or effects.backfill_used or effects.scheduled or effects.probe:
        return False
    if after.wake_ms != before.wake_ms or not after.definition_stored:
        return False
    d = after.definition(proc.codec)
    return not (d.concurrency_key or d.delete_after_completion)


def defer(
    proc: SchedulerProcessor,
    ctx: ProcessorContext,
    record: InputRecord,
    effects: Effects,
    *,
    tenant: str,
    now_ms: int,
) -> None:
    """Keep a quiet step's state in memory, deferred; its tenant's breaker is written now."""
    state, key = effects.state, record.key
    assert state is not None
    assert key is not None
    proc.tenants.written(ctx, key, effects.scheduled, state, now_ms)
    ctx.cache[key] = state
    ctx.defer(key, record.topic, record.offset, now_ms, state)
    proc.metrics.deferred.inc()
    if effects.breaker is not None:
        proc._put_breaker(ctx, tenant, effects.breaker, effects.breaker_change)


def replay(
    proc: SchedulerProcessor, ctx: ProcessorContext, record: InputRecord, now_ms: int
) -> None:
    """Apply again a success whose run the job still lists as running (see the module)."""
    key = record.key
    assert key is not None
    proc.tenants.begin()
    outcome = OUTCOMES.decode(proc.codec, record.value)
    if not isinstance(outcome, ExecutionOutcome) or outcome.status is not OutcomeStatus.succeeded:
        return
    state = proc._load(ctx, key)
    if state is None or not _pending(state, outcome):
        return
    facts = proc._facts(ctx, state, now_ms, tenant=outcome.tenant)
    effects = outcomes.apply_outcome(state, outcome, facts)
    after = effects.state
    if after is None or effects.out:  # never the case for a step that was deferred
        log.warning("replaying %s: not a deferred success; skipped", outcome.execution_id)
        return
    proc.metrics.replayed.inc()
    if after.wake_ms == state.wake_ms and after.definition_stored:
        ctx.cache[key] = after
        ctx.defer(key, record.topic, record.offset, now_ms, after)
    else:  # later than the first time: its look-ahead may have moved on
        proc._store(ctx, key, after)


def _pending(state: JobState, outcome: ExecutionOutcome) -> bool:
    """The outcome's run is still running at its attempt, and no outcome of it was applied."""
    eid, attempt = outcome.execution_id, outcome.attempt
    if not any(r.execution_id == eid and r.attempt == attempt for r in state.running):
        return False
    return not already_applied(state, eid, attempt)
