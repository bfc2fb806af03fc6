"""Records operators read: the per-occurrence decision history, dead letters, rejected input."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from kadence.models.base import (
    MAX_OFFSET,
    MAX_PARTITION,
    Attempt,
    Delivery,
    ExecutionId,
    Identifier,
    UtcDatetime,
    WireModel,
    job_key,
)
from kadence.models.execution import ErrorInfo, ExecutionRequested

MAX_DETAILS = 32
"""Details one history record carries at most (a backfill's progress has the most: seven)."""
MAX_DETAIL_BYTES = 1_000_000
"""A detail's value at most: a backfill dry run lists the instants the job remembers (bounded
by its state, which fits one record); no record the broker takes is longer."""
DetailName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
DetailValue = Annotated[str, Field(max_length=MAX_DETAIL_BYTES)]
EVIDENCE_BYTES = 256 * 1024
"""Original value plus headers kept in one rejected record, at most (kadence/rejects.py)."""
HEADERS_KEPT = 32
"""Headers a rejected record keeps at most; the rest are counted in its reason."""
HEADER_NAME_CHARS = 256


class Decision(StrEnum):
    """Why something did or did not happen to an occurrence."""

    fired = "fired"
    succeeded = "succeeded"
    failed = "failed"
    retry_scheduled = "retry_scheduled"
    redelivered = "redelivered"
    dead_lettered = "dead_lettered"
    cancelled = "cancelled"
    skipped_overlap = "skipped_overlap"
    buffered = "buffered"
    skipped_paused = "skipped_paused"
    skipped_dst = "skipped_dst"
    missed = "missed"
    circuit_open = "circuit_open"
    definition_rejected = "definition_rejected"
    coalesced = "coalesced"
    """Late, and folded into a later firing by missed.mode=latest_once."""
    skipped_dispatched = "skipped_dispatched"
    """A backfill left out an occurrence that had already been dispatched (use force)."""
    paused = "paused"
    resumed = "resumed"
    deleted = "deleted"
    cancel_requested = "cancel_requested"
    rescheduled = "rescheduled"
    """The next occurrence moved without a new definition (a tz database update)."""
    refused = "refused"
    """A command was not applied (a per-job limit, e.g. too many runs at once); the reason
    names the limit. A `rejected` record carries the command itself."""
    quarantined = "quarantined"
    """An unexpected error while firing or maintaining the job: it stops firing until its
    definition is written again or it is paused and resumed. The reason holds the error."""
    backfill_planned = "backfill_planned"
    """A backfill dry run: details hold the facts the plan is computed on (the scheduler's
    memory of what was dispatched in the window); nothing fired."""
    backfill_progress = "backfill_progress"
    """A backfill step: details say runs fired so far, already dispatched, done, and when done
    what was left out past max_occurrences and where to start again."""
    throttled = "throttled"
    """A scheduled occurrence waits for one of its tenant's caps (runs fired per second, runs
    in progress): it is not skipped, it runs in the first second with room (its job's missed-run
    policy then applies). Written when the job starts to wait, at most once a minute per job;
    the reason names the cap. Added last: older readers take it as their default."""
    completed = "completed"
    """The job ran its `max_runs` scheduled occurrences and fires no more (a new version with a
    higher limit runs on). Added last, as `throttled`."""
    chained = "chained"
    """A run ended and a chain link of its job (`on_success`, `on_failure`) triggered another
    job (details: `job_id`, `triggered`, its execution id, and `chain_depth`), or, with
    `stopped` in the details, triggered nothing: the chain reached its depth limit. Added last,
    as `throttled`."""
    notified = "notified"
    """A failure of the job was told to its `notify` webhook, or that call ended (details:
    `event`, `notification`, its execution id, and `state`: sent, delivered, retrying,
    failed). Not a run of the job; a failed notification notifies nobody. Added last."""
    waiting_for_pool = "waiting_for_pool"
    """A run is in its worker pool's executions topic and no worker of that pool is alive (no
    member in the pool's consumer group): it waits there and runs when one joins (details:
    `pool`; written by the reaper's pool watch, streams/reaper/pool_watch.py). Added last, as
    `throttled`."""


ACTOR = "actor"
"""The detail naming who caused a decision by a command (`token:<name>`, `jwt:<sub>`, or
KAFKA_ACTOR); absent on what the scheduler decided by itself."""
KAFKA_ACTOR = "kafka"
"""The actor of a command written to Kafka directly: Kadence cannot tell who sent it."""


class HistoryRecord(WireModel):
    """One decision about one occurrence (or about the job when `execution_id` is null; or,
    `fired` with `runs` in its details, about a steady series of runs: kadence/fired_series.py)."""

    avro_name = "HistoryRecord"

    tenant: Identifier
    job_id: Identifier
    decision: Decision
    at: UtcDatetime
    execution_id: ExecutionId | None = None
    nominal_at: UtcDatetime | None = None
    due_at: UtcDatetime | None = None
    attempt: Attempt | None = None
    delivery: Delivery | None = None
    reason: Annotated[str, Field(max_length=2048)] = ""
    error: ErrorInfo | None = None
    details: Annotated[dict[DetailName, DetailValue], Field(max_length=MAX_DETAILS)] = Field(
        default_factory=dict
    )

    @property
    def key(self) -> str:
        return job_key(self.tenant, self.job_id)


class DeadLetterReason(StrEnum):
    retries_exhausted = "retries_exhausted"
    redelivery_cap = "redelivery_cap"
    not_retryable = "not_retryable"


class DeadLetter(WireModel):
    """An execution Kadence gave up on, with the payload kept for inspection and replay."""

    avro_name = "DeadLetter"

    execution: ExecutionRequested
    reason: DeadLetterReason
    last_error: ErrorInfo | None = None
    dead_lettered_at: UtcDatetime

    @property
    def key(self) -> str:
        return job_key(self.execution.tenant, self.execution.job_id)


class Rejected(WireModel):
    """Input a processor refused, with the original bytes and the reason. Keyed by original key."""

    avro_name = "Rejected"

    source_topic: Annotated[str, Field(max_length=249)]
    """Kafka's topic names are 249 characters at most."""
    partition: Annotated[int, Field(ge=-1, le=MAX_PARTITION)]
    offset: Annotated[int, Field(ge=-1, le=MAX_OFFSET)]
    """-1: the input had none (Kafka's "unknown")."""
    code: Annotated[str, Field(max_length=64)]
    """Stable machine-readable reason, e.g. garbage_bytes, invalid_record, stale_version."""
    reason: Annotated[str, Field(max_length=8192)]
    processor: Annotated[str, Field(max_length=128)]
    rejected_at: UtcDatetime
    original_value: Annotated[bytes, Field(max_length=EVIDENCE_BYTES)] | None = None
    original_headers: Annotated[
        dict[
            Annotated[str, Field(max_length=HEADER_NAME_CHARS)],
            Annotated[str, Field(max_length=EVIDENCE_BYTES)],
        ],
        Field(max_length=HEADERS_KEPT),
    ] = Field(default_factory=dict)
    truncated: bool = False
    """The original value, key or headers were cut to fit the broker's record limit
    (kadence/rejects.py keeps at most 256 KiB of evidence); the reason gives the full sizes."""
