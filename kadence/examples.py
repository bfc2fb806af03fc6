"""One representative record of every type: schema history fixtures, docs and kcat recipes."""

from __future__ import annotations

from datetime import UTC, datetime

from kadence.codec import Codec
from kadence.models import (
    Backfill,
    CancelRun,
    CronSchedule,
    DeadLetter,
    DeadLetterReason,
    Decision,
    ErrorInfo,
    ExecutionBatch,
    ExecutionOutcome,
    ExecutionOutcomes,
    ExecutionRequested,
    ExecutionRevoked,
    HeldRange,
    HistoryRecord,
    HttpTarget,
    JobMoved,
    LeaseEvent,
    LeaseEventKind,
    LeaseSnapshot,
    OutcomeStatus,
    PauseJob,
    Rejected,
    ReplayDeadLetter,
    ResumeJob,
    RetryPolicy,
    RunResult,
    ScheduleDefinition,
    TenantCircuit,
    TriggerNow,
    WireModel,
)
from kadence.models.connections import ConnectionKind, ConnectionRecord

T0 = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
_EXEC_ID = "acme/nightly-report@2026-03-29T00:30:00.000Z"
_OTHER_ID = "acme/ledger-close@2026-03-29T00:30:00.000Z"


def schedule_definition() -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant="acme",
        job_id="nightly-report",
        version=3,
        schedule=CronSchedule(expression="30 1 * * *", timezone="Europe/London", spread_s=30),
        target=HttpTarget(
            url="https://reports.acme.example/run",
            headers={"X-Team": "finance"},
            secret_ref="acme-reports",  # noqa: S106 - a name, not a secret
            result_headers=["Retry-After"],
        ),
        payload=b'{"report":"daily"}',
        retry=RetryPolicy(max_attempts=5),
        timeout_ms=600_000,
        concurrency_key="reports",
        description="Daily finance report at 01:30 London time",
    )


def execution_requested() -> ExecutionRequested:
    d = schedule_definition()
    return ExecutionRequested(
        execution_id=_EXEC_ID,
        tenant=d.tenant,
        job_id=d.job_id,
        definition_version=d.version,
        nominal_at=T0,
        due_at=T0.replace(second=17),
        dispatched_at=T0.replace(second=17),
        target=d.target,
        payload=d.payload,
        timeout_ms=d.timeout_ms,
        lease_ttl_ms=d.lease_ttl_ms,
        concurrency_key=d.concurrency_key,
    )


def examples() -> dict[str, WireModel]:
    """Avro name -> example record, one per record type."""
    ex = execution_requested()
    error = ErrorInfo(type="HttpStatus", message="503 Service Unavailable", code="503")
    common = {"tenant": "acme", "job_id": "nightly-report", "issued_at": T0}
    records: list[WireModel] = [
        schedule_definition(),
        TriggerNow(request_id="req-1", payload=b'{"report":"adhoc"}', **common),
        Backfill(request_id="req-2", start=T0.replace(day=1), end=T0, **common),
        CancelRun(request_id="req-3", execution_id=_EXEC_ID, reason="wrong data", **common),
        PauseJob(request_id="req-4", reason="maintenance", **common),
        ResumeJob(request_id="req-5", **common),
        ReplayDeadLetter(request_id="req-6", execution_id=_EXEC_ID, letter=ex, **common),
        JobMoved(request_id="moved:4:3", version=4, partition=3, **common),
        TenantCircuit(
            tenant="acme",
            partition=3,
            at=T0,
            open_until=T0.replace(minute=31),
            reason="6 of 10 attempts failed",
        ),
        ex,
        ExecutionRevoked(
            execution_id=_EXEC_ID,
            tenant="acme",
            job_id="nightly-report",
            definition_version=3,
            due_at=ex.due_at,
            revoked_at=T0.replace(second=5),
            reason="job paused before its due time",
        ),
        LeaseEvent(
            execution_id=_EXEC_ID,
            tenant="acme",
            job_id="nightly-report",
            attempt=1,
            delivery=1,
            worker_id="worker-1",
            event=LeaseEventKind.acquired,
            at=T0.replace(second=18),
            expires_at=T0.replace(second=48),
            execution=ex,
        ),
        LeaseSnapshot(
            worker_id="worker-1",
            incarnation="4f2a9c",
            at=T0.replace(second=18),
            held=[
                HeldRange(partition=3, start=1_204, count=1, ttl_ms=30_000),
                HeldRange(partition=7, start=88, count=12, ttl_ms=60_000),
            ],
        ),
        ExecutionOutcome(
            execution_id=_EXEC_ID,
            tenant="acme",
            job_id="nightly-report",
            attempt=1,
            delivery=1,
            worker_id="worker-1",
            status=OutcomeStatus.failed,
            retryable=True,
            error=error,
            nominal_at=T0,
            due_at=ex.due_at,
            started_at=T0.replace(second=18),
            finished_at=T0.replace(second=19),
            result=RunResult(
                status_code=503,
                headers={"retry-after": "120"},
                body=b"maintenance until 01:32",
            ),
        ),
        ExecutionBatch(
            tenant=ex.tenant,
            due_at=ex.due_at,
            executions=[
                Codec().encode(ex.model_copy(update={"execution_id": eid, "job_id": job}))
                for eid, job in ((_EXEC_ID, ex.job_id), (_OTHER_ID, "ledger-close"))
            ],
        ),
        ExecutionOutcomes(
            outcomes=[
                ExecutionOutcome(
                    execution_id=f"acme/{job}@2026-03-29T00:30:00.000Z",
                    tenant="acme",
                    job_id=job,
                    attempt=1,
                    delivery=1,
                    worker_id="worker-1",
                    status=OutcomeStatus.succeeded,
                    nominal_at=T0,
                    due_at=T0,
                    started_at=T0.replace(second=at),
                    finished_at=T0.replace(second=at),
                )
                for job, at in (("orders-export", 1), ("ledger-close", 2))
            ]
        ),
        HistoryRecord(
            tenant="acme",
            job_id="nightly-report",
            decision=Decision.retry_scheduled,
            at=T0.replace(second=19),
            execution_id=_EXEC_ID,
            nominal_at=T0,
            due_at=T0.replace(second=21),
            attempt=2,
            reason="503 from target",
            error=error,
            details={"backoff_ms": "1840"},
        ),
        DeadLetter(
            execution=ex,
            reason=DeadLetterReason.retries_exhausted,
            last_error=error,
            dead_lettered_at=T0.replace(minute=45),
        ),
        Rejected(
            source_topic="kadence.schedules",
            partition=3,
            offset=42,
            code="garbage_bytes",
            reason="not a Kadence record",
            processor="scheduler",
            rejected_at=T0,
            original_value=b"\x00\x01garbage",
            original_headers={"source": "kcat"},
        ),
        ConnectionRecord(
            tenant="acme",
            name="billing-api",
            kind=ConnectionKind.oauth2,
            version=2,
            changed_at=T0,
            fingerprint="3f9a0c1d22b7e4a8",
            details={"token_url": "https://auth.example.com/oauth/token", "client_id": "kadence"},
            key_id="k1",
            nonce=bytes(range(12)),
            sealed=b"\x8c" * 48,
        ),
    ]
    return {type(r).avro_name: r for r in records}
