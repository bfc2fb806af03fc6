"""Chain links: when a run of a job has ended for good (succeeded; or failed and dead-lettered,
after its retries), trigger the jobs its `on_success` or `on_failure` names, and say so in its
history; refuse a link's trigger that reaches no job, saying so in the upstream job's history
(docs/execution.md, "Chaining").

A trigger is a `TriggerNow` on `scheduler-control` (Kadence's own word: on `commands` a
trigger with `caused_by` is refused), written in the same transaction as the outcome's
other effects: a crash before the commit writes it again when the outcome is read again, with
the same request id (kadence/chains.py), which the downstream job applies once."""

from __future__ import annotations

from kadence.chains import SUCCESS, chain_depth_of, chain_request_id, result_payload
from kadence.clock import ms_to_datetime
from kadence.models import (
    MAX_CHAIN_DEPTH,
    ChainLink,
    Decision,
    ExecutionOutcome,
    TriggerNow,
    job_key,
)
from kadence.timeengine.identity import manual_execution_id
from streams.scheduler.state import JobState
from streams.scheduler.step import Effects, Emit, Facts, Refused, Routed, Sink, keyed_history


def follow(
    state: JobState, effects: Effects, facts: Facts, outcome: ExecutionOutcome, how: str
) -> None:
    """The run of `outcome` ended `how` (SUCCESS, or FAILURE: dead-lettered): trigger each job
    its link list names, or nothing past the depth limit (a `chained` record says which)."""
    d = state.definition(facts.codec)
    links = d.on_success if how == SUCCESS else d.on_failure
    if not links:
        return
    depth = chain_depth_of(outcome.execution_id)
    if depth >= MAX_CHAIN_DEPTH:
        effects.history(
            state,
            facts,
            Decision.chained,
            execution_id=outcome.execution_id,
            attempt=outcome.attempt,
            reason=(
                f"on_{how}: nothing triggered: this run is {depth} links from the run that "
                f"started its chain, the limit ({MAX_CHAIN_DEPTH}; a cycle of links stops here)"
            ),
            details={"stopped": "depth_limit", "chain_depth": str(depth)},
        )
        return
    passed = result_payload(outcome) if any(link.pass_result for link in links) else None
    for link in links:
        trigger = _trigger(
            d.tenant, link, outcome, how=how, depth=depth + 1, passed=passed, now_ms=facts.now_ms
        )
        effects.out.append(trigger)
        rid = chain_request_id(outcome.execution_id, how, link.job_id, depth + 1)
        effects.history(
            state,
            facts,
            Decision.chained,
            execution_id=outcome.execution_id,
            attempt=outcome.attempt,
            reason=f"on_{how}: triggered {link.job_id}",
            details={
                "on": how,
                "job_id": link.job_id,
                "triggered": manual_execution_id(job_key(d.tenant, link.job_id), rid),
                "chain_depth": str(depth + 1),
            },
        )


def _trigger(
    tenant: str,
    link: ChainLink,
    outcome: ExecutionOutcome,
    *,
    how: str,
    depth: int,
    passed: bytes | None,
    now_ms: int,
) -> Emit:
    command = TriggerNow(
        tenant=tenant,
        job_id=link.job_id,
        request_id=chain_request_id(outcome.execution_id, how, link.job_id, depth),
        issued_at=ms_to_datetime(now_ms),
        payload=passed if link.pass_result else None,
        caused_by=outcome.execution_id,
        chain_depth=depth,
    )
    key = command.key
    route = f"{tenant}/~{link.concurrency_key}" if link.concurrency_key else key
    return Emit(Sink.control, Routed(command, route))


def unknown_job(command: object, key: str, partition: int, now_ms: int) -> Refused:
    """The refusal of a command for a job this partition does not have; a chain link's trigger
    also tells the upstream job's history (its tenant is the command's: TriggerNow checks)."""
    why = f"no job {key} on this partition ({partition})"
    if not isinstance(command, TriggerNow) or command.caused_by is None:
        return Refused("unknown_job", why)
    upstream = command.caused_by.partition("@")[0]
    told = keyed_history(
        upstream.encode(),
        Decision.refused,
        f"the chain link's trigger of {key} after {command.caused_by} was refused: {why} "
        "(deleted, never created, or in a concurrency group the link does not name)",
        now_ms,
    )
    return Refused("unknown_job", why, [told] if told else [])
