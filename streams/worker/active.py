"""A run this worker has claimed, and what one of its transactions carries."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field

from confluent_kafka import KafkaError

from kadence.models import ExecutionRequested, HeldRange
from kadence.targets import Delivery, Result, Stop, Target
from streams.worker.inbox import Item

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ActiveRun:
    """An execution claimed under a lease: its invocation, stop signal and lease times."""

    item: Item
    stop: Stop
    started_ms: int
    """The claim's time, then the moment the run is handed to its target (`Worker.start`, and
    for a run on the pool when a pool thread takes it)."""
    lease_expires_ms: int
    next_renew_ms: int
    future: Future[Result] | None = None
    """Set once the claim has committed and the invocation started."""
    finished_ms: int | None = None
    """When its invocation ended (for a Kafka produce: the broker's acknowledgement)."""
    pooled: bool = True
    """Its invocation takes a thread of the pool, so one of the worker's slots (a run its
    target starts without a thread does not)."""
    lease_lost: bool = False
    """The lease ran out before a renewal or the outcome committed: the run was told to stop
    and reports `lease_lost`, which the scheduler records but does not apply."""

    @property
    def execution(self) -> ExecutionRequested:
        return self.item.execution


@dataclass(eq=False)
class Delivered:
    """A run delivered in the open transaction: its record and its outcome go together
    (streams/worker/delivering.py)."""

    run: ActiveRun
    delivery: Delivery | None
    """None: reported failed without its record (`refused`)."""
    refused: Result | None = None
    error: KafkaError | None = None
    """What the broker said of its record, if it refused it."""


@dataclass
class TxnWork:
    """What one transaction carries, and what to do once it commits."""

    claims: list[ActiveRun] = field(default_factory=list)
    renewals: list[ActiveRun] = field(default_factory=list)
    finished: list[tuple[ActiveRun, Result]] = field(default_factory=list)
    ahead: list[ActiveRun] = field(default_factory=list)
    """Claims ahead of the due time: they wait in memory once this commits."""
    held: list[ActiveRun] | None = None
    """With lease snapshots: every run listed in this transaction's snapshot (None: no
    snapshot); each one's lease is renewed once it commits."""
    ranges: list[HeldRange] = field(default_factory=list)
    """`held` by reference, as the snapshot lists it."""
    deliveries: list[Delivered] = field(default_factory=list)
    """Runs whose record goes in this transaction with their outcome (no lease)."""


def invoke(caller: Target, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
    """Run the target (on the invocation pool); a target that raises is a retryable failure."""
    try:
        return caller(ex, stop, deadline)
    except Exception as exc:  # a target bug must not kill the worker
        log.exception("target %s failed for %s", ex.target.kind, ex.execution_id)
        return Result.failed(type(exc).__name__, str(exc), retryable=True)
