"""The outcome a worker reports for a run, for the tests and benchmarks that answer the
scheduler's executions themselves, with no worker in between; and a run's revocation."""

from __future__ import annotations

from datetime import datetime

from kadence.models import (
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    OutcomeStatus,
)


def outcome_of(
    ex: ExecutionRequested, *, error: ErrorInfo | None = None, worker_id: str = "w"
) -> ExecutionOutcome:
    """`ex` run at its due time by `worker_id`: succeeded, or with `error` failed (retryable),
    for the attempt and delivery it names."""
    return ExecutionOutcome(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        attempt=ex.attempt,
        delivery=ex.delivery,
        worker_id=worker_id,
        status=OutcomeStatus.succeeded if error is None else OutcomeStatus.failed,
        retryable=error is not None,
        error=error,
        nominal_at=ex.nominal_at,
        due_at=ex.due_at,
        started_at=ex.due_at,
        finished_at=ex.due_at,
    )


def revocation_of(
    ex: ExecutionRequested, *, reason: str = "paused", at: datetime | None = None
) -> ExecutionRevoked:
    """What the scheduler writes to revoke `ex` (its definition version) before its due time,
    at `at` (default: its due time)."""
    return ExecutionRevoked(
        execution_id=ex.execution_id,
        tenant=ex.tenant,
        job_id=ex.job_id,
        definition_version=ex.definition_version,
        due_at=ex.due_at,
        revoked_at=ex.due_at if at is None else at,
        reason=reason,
    )
