"""The records the worker writes about a run (lease events, the outcome) and about an
execution record it cannot use (`rejected`)."""

from __future__ import annotations

from kadence import rejects
from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.headers import Headers
from kadence.models import ErrorInfo, ExecutionOutcome, LeaseEvent, LeaseEventKind, OutcomeStatus
from kadence.targets import Result
from streams.kafkaio.ports import MessageLike
from streams.worker.active import ActiveRun


def lease_event(
    run: ActiveRun,
    kind: LeaseEventKind,
    now_ms: int,
    worker_id: str,
    *,
    with_execution: bool = False,
) -> LeaseEvent:
    """A claim (`acquired`, carrying the execution for the reaper to redeliver), a renewal or
    a release; a released lease expires at once."""
    ex = run.execution
    expires = now_ms + ex.lease_ttl_ms if kind is not LeaseEventKind.released else now_ms
    return LeaseEvent(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        attempt=ex.attempt,
        delivery=ex.delivery,
        worker_id=worker_id,
        event=kind,
        at=ms_to_datetime(now_ms),
        expires_at=ms_to_datetime(expires),
        execution=ex if with_execution else None,
    )


def outcome_of(run: ActiveRun, result: Result, now_ms: int, worker_id: str) -> ExecutionOutcome:
    """The run's outcome, ended when its invocation did (`now_ms` if that was not stamped).
    A run whose lease was lost reports `lease_lost` whatever the target
    said (the reaper has handed it on); a timeout or cancel without an error gets one. What the
    target returned (`result.detail`) is kept as the attempt's result."""
    ex = run.execution
    status, error = result.status, result.error
    ended = now_ms if run.finished_ms is None else run.finished_ms
    if run.lease_lost and status is not OutcomeStatus.lease_lost:
        what = status.value + (f" ({error.message})" if error else "")
        error = ErrorInfo.cut(
            "LeaseLost", f"the lease expired before the run ended; the target said: {what}"
        )
        status = OutcomeStatus.lease_lost
    elif status is OutcomeStatus.timed_out and error is None:
        error = ErrorInfo(type="Timeout", message=f"no result within {ex.timeout_ms} ms")
    elif status is OutcomeStatus.cancelled and error is None:
        error = ErrorInfo(type="Cancelled", message="cancelled while running")
    return ExecutionOutcome(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        attempt=ex.attempt,
        delivery=ex.delivery,
        worker_id=worker_id,
        status=status,
        retryable=result.retryable,
        error=error,
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        started_at=ms_to_datetime(run.started_ms),
        finished_at=ms_to_datetime(max(ended, run.started_ms)),
        result=result.detail,
        throttled_ms=run.item.throttled_ms,
    )


def delivered_outcome(run: ActiveRun, worker_id: str) -> ExecutionOutcome:
    """The `succeeded` outcome of a run delivered in the worker's transaction, built without
    validation: every field is the validated execution's own or the worker's (a burst builds
    thousands at its due instant)."""
    ex = run.execution
    at = ms_to_datetime(run.started_ms)
    return ExecutionOutcome.model_construct(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        attempt=ex.attempt,
        delivery=ex.delivery,
        worker_id=worker_id,
        status=OutcomeStatus.succeeded,
        retryable=False,
        error=None,
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        started_at=at,
        finished_at=at,
        result=None,
    )


def rejected(
    msg: MessageLike, code: str, reason: str, *, now_ms: int, codec: Codec, to_topic: str
) -> tuple[bytes | None, bytes, Headers]:
    """(key, value, headers) of the `rejected` record for `msg`, read from `executions`."""
    raw = msg.headers() or []
    return rejects.rejected_record(
        topic=msg.topic() or "",
        partition=msg.partition() or 0,
        offset=msg.offset() or 0,
        key=msg.key(),
        value=msg.value(),
        headers=list(raw.items()) if isinstance(raw, dict) else list(raw),
        code=code,
        reason=reason,
        processor="worker",
        now_ms=now_ms,
        codec=codec,
        to_topic=to_topic,
    )
