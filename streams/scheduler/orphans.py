"""Replaying a dead letter of a job this partition no longer has (deleted, or moved away):
it runs once more as the letter holds it, one replay of an execution at a time.

With no job state to remember its runs, the partition keeps `~replaying/<execution id>`: until
when the last replay may still run (until its outcome, or at most its timeout and lease four
times over). Another replay of the execution meanwhile is refused, as for a job that exists.
"""

from __future__ import annotations

from kadence.models import Decision, ReplayDeadLetter
from streams.runtime.context import ProcessorContext
from streams.scheduler import outcomes
from streams.scheduler.step import Emit, Refused, keyed_history

REPLAYING_PREFIX = b"~replaying/"
"""`~replaying/<execution id>`: until when a replay of a deleted job's dead letter may run."""


def replay_once(
    ctx: ProcessorContext, key: bytes, cmd: ReplayDeadLetter, now_ms: int
) -> list[Emit]:
    """The records that replay `cmd.letter`, or Refused while its last replay may still run."""
    assert cmd.letter is not None
    mark = REPLAYING_PREFIX + cmd.letter.execution_id.encode()
    until = ctx.get(mark)
    if until is not None and int(until) > now_ms:
        why = (
            f"replay {cmd.request_id}: a replay of {cmd.letter.execution_id} may still be "
            "running; replay it once that run has ended"
        )
        told = keyed_history(key, Decision.refused, why, now_ms)
        raise Refused("run_active", why, [told] if told else [])
    ends = now_ms + 4 * (cmd.letter.timeout_ms + cmd.letter.lease_ttl_ms)
    ctx.put(mark, str(ends).encode(), None)
    return outcomes.replay_orphan(cmd, now_ms)


def ended(ctx: ProcessorContext, execution_id: str) -> None:
    """An outcome of a job this partition does not have: a replay of it, if any, has ended."""
    mark = REPLAYING_PREFIX + execution_id.encode()
    if ctx.get(mark) is not None:
        ctx.put(mark, None, None)
