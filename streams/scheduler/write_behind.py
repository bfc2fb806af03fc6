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

from kadence.codec import Codec
from kadence.models import ExecutionOutcome, OutcomeStatus
from streams.scheduler.settled import already_applied
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects


def quiet(codec: Codec, before: JobState, effects: Effects) -> bool:
    """Whether the step changed nothing but the job's own runs and settled outcomes."""
    after = effects.state
    if after is None or effects.out or effects.urgent or effects.started:
        return False
    if effects.dead_delta or effects.backfill_used or effects.scheduled or effects.probe:
        return False
    if after.wake_ms != before.wake_ms or not after.definition_stored:
        return False
    d = after.definition(codec)
    return not (d.concurrency_key or d.delete_after_completion)


def replayable(state: JobState) -> bool:
    """Whether a replayed step's state may wait again (else it is written at once)."""
    return state.definition_stored


def pending(state: JobState, outcome: ExecutionOutcome) -> bool:
    """Whether a replayed outcome was deferred and is not in the stored state: a success whose
    run is still running at its attempt, no outcome of it applied."""
    if outcome.status is not OutcomeStatus.succeeded:
        return False
    eid, attempt = outcome.execution_id, outcome.attempt
    if not any(r.execution_id == eid and r.attempt == attempt for r in state.running):
        return False
    return not already_applied(state, eid, attempt)
