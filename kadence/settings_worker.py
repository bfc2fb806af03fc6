"""A worker's settings (kadence/settings.py's KadenceSettings has them as its own fields:
KADENCE_WORKER_CONCURRENCY and the rest). Here so that each file stays one sitting long."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator


class WorkerSettings(BaseModel):
    """The worker's knobs: slots, runs without a thread, fairness, claims ahead, lease format,
    exactly-once delivery to Kafka-topic targets."""

    worker_concurrency: Annotated[int, Field(ge=1, le=1_000)] = 64
    """Slots: executions one worker process runs at the same time on its thread pool (plain
    `def` in-process handlers, a Kafka topic not known to exist yet). A run in flight costs the
    worker loop nothing per turn (finished runs are pushed to it, renewals come off a deadline
    heap; an idle turn takes about 30 us of CPU with 64 or 1 000 runs held, bench.worker_turn),
    only a parked thread. 64 lets one worker keep slow handlers going without starving the
    rest; a CPU-bound handler wants fewer (about the cores). Runs a target starts without a
    thread take no slot: HTTP and SQS requests and `async def` handlers on the worker's event
    loop, Kafka produces awaiting their ack (`worker_async_max_in_flight` bounds those)."""
    worker_async_max_in_flight: Annotated[int, Field(ge=1, le=65_536)] = 8_192
    """Runs one worker has in flight without a thread at once at most: HTTP and SQS requests
    and `async def` handlers on its event loop, Kafka produces awaiting their ack. Past it due
    runs wait, unclaimed, until some end (none is lost); a tenant runs at most
    `worker_tenant_max_share` of it. Each HTTP run holds a socket: the worker raises its
    open-files limit to the hard one at start. A worker holds only what one lease snapshot
    lists (`worker_claim_ahead_max`)."""
    worker_http_warm_ms: Annotated[int, Field(ge=0, le=3_000)] = 2_000
    """HTTP targets: connections to a target are opened this long before the second its runs
    are due in, as many as the busiest such second runs (at most 8 192 to one address), so a
    burst at the top of a second sends its requests over connections already open
    (connectors/http_warm.py). The address is checked as each run checks it. 0: no warming."""
    worker_dns_ttl_min_s: Annotated[int, Field(ge=0, le=3_600)] = 5
    """HTTP and SQS targets: a host name's answer is kept at least this long, whatever its TTL
    (a TTL of 0 would look the name up for every run), and a failed lookup this long
    (connectors/http_dns.py). 0: every run looks its host up."""
    worker_dns_ttl_max_s: Annotated[int, Field(ge=1, le=86_400)] = 300
    """... and at most this long, whatever its TTL (a receiver that moved is found within it;
    below the floor, this wins)."""
    worker_tenant_weights: dict[str, Annotated[float, Field(gt=0, le=1_000)]] = Field(
        default_factory=dict
    )
    """Fairness between tenants in a worker: tenant -> executions started per round of the
    weighted deficit round robin over due executions (JSON object; others weigh 1)."""
    worker_fairness: Literal["drr", "fifo"] = "drr"
    """`drr`: due executions are started tenant by tenant (weighted deficit round robin).
    `fifo`: in due order regardless of tenant (for comparison; a flood delays everyone)."""
    worker_tenant_max_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    """By default one tenant runs at most this share of a worker's `worker_concurrency` slots
    at once (rounded down, at least 1), so a tenant whose runs hang (a target that never
    answers, long timeouts) leaves the other slots to the other tenants; and at most this share
    of `worker_async_max_in_flight` runs without a thread. 1: no default cap."""
    worker_tenant_max_running: Annotated[int, Field(ge=0, le=1_000)] | None = None
    """Executions of one tenant one worker runs at once on its slots at most, for every tenant,
    instead of `worker_tenant_max_share` of them (0: explicitly no cap beyond
    `worker_concurrency`); runs without a thread keep the share."""
    worker_tenant_max_running_by_tenant: dict[str, Annotated[int, Field(ge=0, le=1_000)]] = Field(
        default_factory=dict
    )
    """The cap of the tenants named on a worker's slots (JSON object tenant -> executions; 0:
    no cap), over the two settings above."""
    worker_claim_ahead_max: Annotated[int, Field(ge=0, le=8_192)] | None = None
    """Executions one worker claims ahead of their due time (listed in a committed lease
    snapshot up to half their lease TTL early, so each starts from memory at its due instant)
    at once at most; by default 8 192 - `worker_concurrency`. Whatever this says, a worker
    holds (running or claimed ahead) only what one lease snapshot of 4 096 ranges is sure to
    list however the runs end: up to 8 191 runs of consecutive offsets, 4 096 scattered ones.
    0: claim only when due."""
    worker_inbox_max_executions: Annotated[int, Field(ge=100, le=10_000_000)] = 100_000
    worker_inbox_max_bytes: Annotated[int, Field(ge=1 << 20, le=1 << 40)] = 256 << 20
    """Executions one worker holds read but not claimed (waiting for their due time or their
    turn), and their bytes, at most: past either it stops reading (pauses its partitions; the
    backlog waits in Kafka, in the consumer lag) and a tenant at its running cap holds no more
    than twice its cap (the rest is read again later): streams/worker/backlog.py. It must hold
    what the scheduler dispatches ahead (30 s) at the worker's share of the rate: 100 000 is
    30 s of 3 300 a second per worker, about 270 MB held (about 2.7 KB each)."""
    lease_format: Literal["snapshot", "events"] = "snapshot"
    """What workers write on `leases`: `snapshot`, one LeaseSnapshot per transaction listing
    every run held by reference; `events`, one LeaseEvent per claim, renewal and release (the
    format of releases before 2026-11-30: for workers upgraded while some reapers are that
    old)."""
    outcome_format: Literal["batches", "records"] = "batches"
    """What workers write on `outcomes`: `batches`, one ExecutionOutcomes per scheduler
    partition per transaction, carrying every outcome of that transaction for it; `records`,
    one ExecutionOutcome per attempt (the format of releases before 0.12.0: for workers
    upgraded while some schedulers or the views are that old; CHANGELOG.md)."""
    worker_kafka_exactly_once: bool = True
    """Kafka-topic targets: the worker writes the tenant's record in the transaction that also
    carries the run's outcome and its consumer offsets, so a `read_committed` consumer of the
    tenant's topic sees each execution exactly once whatever crashes (docs/execution.md). False:
    the previous path, a claim under a lease, then an idempotent producer of the target's own
    (at least once, with the idempotency key)."""
    worker_deliveries_per_transaction: Annotated[int, Field(ge=1, le=100_000)] = 5_000
    """Kafka-topic runs one worker transaction delivers at most (with exactly once)."""

    @field_validator("worker_tenant_max_running", mode="before")
    @classmethod
    def _unset(cls, value: object) -> object:
        """Empty (or "None", as a parent passes an unset value to a child) means unset."""
        return None if isinstance(value, str) and value.strip() in ("", "None") else value
