"""What flows between the scheduler, the workers and the reaper for one execution."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from kadence.models.base import (
    DEFAULT_POOL,
    MAX_OFFSET,
    MAX_PAYLOAD_BYTES,
    MAX_TIMEOUT_MS,
    Attempt,
    Delivery,
    ExecutionId,
    Identifier,
    MediaType,
    Partition,
    PoolName,
    UtcDatetime,
    Version,
    WireModel,
    WorkerId,
    job_key,
)
from kadence.models.results import RunResult
from kadence.models.targets import Target


class TriggerKind(StrEnum):
    schedule = "schedule"
    manual = "manual"
    backfill = "backfill"
    catch_up = "catch_up"
    retry = "retry"
    redelivery = "redelivery"
    replay = "replay"
    """Run again from the dead-letter topic by a ReplayDeadLetter command."""
    notification = "notification"
    """Not a run of the job: the webhook call telling the job's `notify` URL of a failure
    (its execution id holds `@notify:`; kadence/notifications.py)."""


MAX_HELD_RANGES = 4_096
"""Ranges one LeaseSnapshot may list (a worker holds far fewer: its slots plus what it has
claimed ahead, mostly consecutive offsets); keeps the record well under the broker's limit."""

MAX_HELD_RUNS = 65_536
"""Runs one LeaseSnapshot may hold in all its ranges together. A worker holds at most its
slots (1 000) and its claims ahead (3 000), and a finished run until its outcome commits: a
snapshot beyond this is not a worker's, and is rejected before the reaper would expand it."""

MAX_LEASE_TTL_MS = 86_400_000
"""An execution's (and so a held range's) lease TTL at most: a day, where schedules allow 10
minutes. Bounded so that every expiry a worker or the reaper computes stays a sane instant."""


class ExecutionRequested(WireModel):
    """Run this occurrence. Keyed by tenant on the executions topic.

    `execution_id` is the idempotency key: every retry and redelivery of the same occurrence
    carries the same one; `attempt` counts retries after failures, `delivery` counts
    redeliveries after lost leases.
    """

    avro_name = "ExecutionRequested"

    execution_id: ExecutionId
    tenant: Identifier
    job_id: Identifier
    definition_version: Version
    attempt: Attempt = 1
    delivery: Delivery = 1
    trigger: TriggerKind = TriggerKind.schedule
    nominal_at: UtcDatetime
    """The occurrence's identity: the scheduled instant before spread."""
    due_at: UtcDatetime
    """Not before this instant (nominal + spread, or the retry time). The scheduler may dispatch
    up to `KADENCE_DISPATCH_AHEAD_MS` earlier, so a burst is on the topic before it is due:
    whoever runs it waits for `due_at`."""
    dispatched_at: UtcDatetime
    target: Target
    payload: Annotated[bytes, Field(max_length=MAX_PAYLOAD_BYTES)] = b""
    content_type: MediaType = "application/json"
    timeout_ms: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_MS)]
    lease_ttl_ms: Annotated[int, Field(ge=1, le=MAX_LEASE_TTL_MS)]
    concurrency_key: Identifier | None = None
    start_by: UtcDatetime | None = None
    """Not started after this instant: the job's `max_event_age_ms` past the run's scheduled
    time, the same for every attempt and delivery; a worker reaching it later reports the run
    failed (`MAX_EVENT_AGE_ERROR`, not retryable) without calling its target. None: no limit."""

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)

    @property
    def routing_key(self) -> str:
        """The job's partition key on the job-keyed topics (as ScheduleDefinition.routing_key)."""
        return f"{self.tenant}/~{self.concurrency_key}" if self.concurrency_key else self.key


class ExecutionRevoked(WireModel):
    """Do not run this execution: it was dispatched ahead of its due time and, before that
    time came, its job was paused, changed or deleted, or the run was cancelled.

    Same tenant key, so it follows its ExecutionRequested on the same executions partition. It
    names the definition version it revokes: a re-dispatch of the same occurrence under a newer
    version (same execution id) comes after it and stands.
    """

    avro_name = "ExecutionRevoked"

    execution_id: ExecutionId
    tenant: Identifier
    job_id: Identifier
    definition_version: Version
    due_at: UtcDatetime
    revoked_at: UtcDatetime
    reason: Annotated[str, Field(max_length=1024)]

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)


MAX_EXECUTIONS_PER_BATCH = 1_000
"""Executions one `ExecutionBatch` record carries at most (the scheduler also keeps each record
under MAX_BATCH_BYTES: streams/scheduler/batching.py)."""
MAX_BATCH_BYTES = 512 * 1024
"""The executions of one `ExecutionBatch` together, in bytes, at most: half the broker's
default record limit, so that a batch never meets it whatever its headers."""


class ExecutionBatch(WireModel):
    """Several executions of one tenant due at the same instant, in one record on an executions
    topic (docs/execution.md, "Executions in batches"). Each entry is an ExecutionRequested
    exactly as a record of its own would carry it (single-object encoded), so a worker reads
    and forwards each one as it would a record of its own. Keyed by the tenant, as those are.
    A worker moves a batch's executions together: delivered in one transaction, or claimed
    together (one lease reference, the batch's offset)."""

    avro_name = "ExecutionBatch"

    tenant: Identifier
    due_at: UtcDatetime
    """The due instant every entry has."""
    executions: Annotated[
        list[Annotated[bytes, Field(min_length=1, max_length=MAX_BATCH_BYTES)]],
        Field(min_length=2, max_length=MAX_EXECUTIONS_PER_BATCH),
    ]


class LeaseEventKind(StrEnum):
    acquired = "acquired"
    renewed = "renewed"
    released = "released"


class LeaseEvent(WireModel):
    """A worker's claim on one delivery of an execution; renewed every ttl/3, released last."""

    avro_name = "LeaseEvent"

    execution_id: ExecutionId
    tenant: Identifier
    job_id: Identifier
    attempt: Attempt
    delivery: Delivery
    worker_id: WorkerId
    event: LeaseEventKind
    at: UtcDatetime
    expires_at: UtcDatetime
    execution: ExecutionRequested | None = None
    """On `acquired`: the execution itself, so the reaper can redeliver it if the lease expires."""


class HeldRange(WireModel):
    """Consecutive offsets of one executions partition that a worker holds under one TTL."""

    partition: Partition
    start: Annotated[int, Field(ge=0, le=MAX_OFFSET - MAX_HELD_RUNS)]
    """The first offset (the range's last, `start + count - 1`, is a Kafka offset too)."""
    count: Annotated[int, Field(ge=1, le=MAX_HELD_RUNS)]
    ttl_ms: Annotated[int, Field(ge=1, le=MAX_LEASE_TTL_MS)]
    """Each lease in the range runs until the snapshot's `at` plus this."""


class LeaseSnapshot(WireModel):
    """Everything one worker process holds, by reference, as of one of its transactions.

    Keyed by `worker_id/incarnation` on the leases topic. A worker writes one with every
    transaction that claims, finishes or renews (at least every ttl/3): it is the heartbeat
    that renews every lease it lists until `at + ttl_ms`. An execution the worker held and no
    longer lists is released (its outcome went out in the same transaction). The reaper keeps
    each incarnation's latest snapshot; when a listed lease expires it reads the execution back
    from `executions` at (partition, offset) and redelivers it. No payload travels here.
    """

    avro_name = "LeaseSnapshot"

    worker_id: WorkerId
    incarnation: Identifier
    """Random per worker process start: a restarted worker does not release what its previous
    process held (those leases expire and are redelivered)."""
    at: UtcDatetime
    held: Annotated[list[HeldRange], Field(default_factory=list, max_length=MAX_HELD_RANGES)]
    pool: PoolName = DEFAULT_POOL
    """The worker pool the worker serves: `held` are offsets of that pool's executions topic
    (kadence/topics.py `pool_spec`), where the reaper reads expired ones back."""

    @model_validator(mode="after")
    def _bounded(self) -> LeaseSnapshot:
        total = sum(r.count for r in self.held)
        if total > MAX_HELD_RUNS:
            raise ValueError(
                f"held ranges list {total} runs in all, more than {MAX_HELD_RUNS}: "
                "no worker holds that many"
            )
        return self

    @property
    def key(self) -> str:
        return f"{self.worker_id}/{self.incarnation}"


class OutcomeStatus(StrEnum):
    succeeded = "succeeded"
    failed = "failed"
    timed_out = "timed_out"
    cancelled = "cancelled"
    lease_lost = "lease_lost"
    """The worker stopped itself because it could not renew its lease in time."""


REDELIVERY_CAP_ERROR = "RedeliveryCap"
"""`ErrorInfo.type` of the outcome the reaper writes when a run's lease ran out on as many
deliveries in a row as the redelivery cap allows; the scheduler dead-letters such a run with
reason `redelivery_cap`."""


MAX_EVENT_AGE_ERROR = "MaxEventAge"
"""`ErrorInfo.type` of the outcome a worker writes for a run it reached after its `start_by`:
not started, not retryable, so the scheduler dead-letters it (docs/execution.md)."""

MAX_ERROR_MESSAGE = 4096


class ErrorInfo(WireModel):
    type: Annotated[str, Field(max_length=256)]
    message: Annotated[str, Field(max_length=MAX_ERROR_MESSAGE)]
    code: Annotated[str, Field(max_length=64)] | None = None
    """e.g. the HTTP status."""

    @classmethod
    def cut(cls, type: str, message: str, code: str | None = None) -> ErrorInfo:
        """An error built from what a target or a library said, cut to fit (a message of any
        length, text with lone surrogates: never a failure to report a failure)."""

        def fit(text: str, limit: int) -> str:
            return text[:limit].encode(errors="replace").decode()

        return cls(
            type=fit(type, 256),
            message=fit(message, MAX_ERROR_MESSAGE),
            code=None if code is None else fit(code, 64),
        )


MAX_THROTTLED_MS = 2**53 - 1
"""Milliseconds a run waited for its destination's rate limit at most (a JSON-safe integer)."""


class ExecutionOutcome(WireModel):
    """How one attempt/delivery ended. Written before the lease is released."""

    avro_name = "ExecutionOutcome"

    execution_id: ExecutionId
    tenant: Identifier
    job_id: Identifier
    attempt: Attempt
    delivery: Delivery
    worker_id: WorkerId
    status: OutcomeStatus
    retryable: bool = False
    error: ErrorInfo | None = None
    nominal_at: UtcDatetime
    due_at: UtcDatetime
    started_at: UtcDatetime
    finished_at: UtcDatetime
    result: RunResult | None = None
    """What the attempt returned (an HTTP answer's status, body start and chosen headers, a
    handler's value), bounded (kadence/models/results.py); None when the target has none (a
    Kafka delivery, a timeout) and in outcomes written before results existed."""
    throttled_ms: Annotated[int, Field(ge=0, le=MAX_THROTTLED_MS)] = 0
    """How long the run waited, once due, for its destination's rate limit (`rate_limit` on
    its target) before it started; part of `started_at - due_at`."""

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)


MAX_OUTCOMES_PER_RECORD = 2_000
"""Outcomes one `ExecutionOutcomes` record carries at most (a worker writes fewer: it also
keeps each record under the broker's limit, streams/worker/outcome_batches.py)."""


class ExecutionOutcomes(WireModel):
    """Several attempts' outcomes in one record on the outcomes topic: what one worker
    transaction tells one scheduler partition (docs/execution.md, "Outcomes in batches"). Each
    outcome is read as if it were a record of its own, keyed by its job; a batch has no key."""

    avro_name = "ExecutionOutcomes"

    outcomes: Annotated[
        list[ExecutionOutcome], Field(min_length=1, max_length=MAX_OUTCOMES_PER_RECORD)
    ]


def entries_of(record: WireModel) -> list[WireModel]:
    """What a decoded record says, one model each: a batch's outcomes, or the record itself
    (for readers that look at each outcome, whichever way it was written)."""
    return list(record.outcomes) if isinstance(record, ExecutionOutcomes) else [record]
