"""The reaper as a runtime processor: a lease table with an expiry timer per execution.

Input: `leases` (keyed by execution id). Per execution it keeps the current delivery, its
worker, the lease expiry and the execution itself (from the `acquired` event). When a lease
expires with no `released` (the worker writes its outcome and the release in one transaction):
- below the redelivery cap: the same execution, `delivery + 1`, trigger `redelivery`, goes back
  on `executions`, with a `redelivered` history record;
- at the cap: a non-retryable `failed` outcome (`RedeliveryCap`) goes to `outcomes`, and the
  scheduler dead-letters it: a job that kills every worker that runs it stops there.
Events of an older delivery than the current one (a worker that was paused past its lease)
change nothing. All of it exactly-once on the processor runtime, like the scheduler.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.headers import headers_for
from kadence.models import (
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    ExecutionRequested,
    HistoryRecord,
    LeaseEvent,
    LeaseEventKind,
    OutcomeStatus,
    TriggerKind,
    WireModel,
)
from kadence.models.base import IDENT_RE
from kadence.partitioning import execution_route, partition_for
from kadence.topics import LEASES, Topics
from streams.reaper.metrics import ReaperMetrics
from streams.runtime.records import InputRecord
from streams.runtime.reject import reject, why_refused
from streams.runtime.task import Task

log = logging.getLogger(__name__)
LEASE_GRACE_MS = 2_000
"""Waited past a lease's expiry before acting: room for clock skew between worker and reaper."""
FORGET_AFTER_MS = 86_400_000
"""How long a redelivered or given-up execution is remembered, to ignore its stale events."""
REAPER_ID = "reaper"


@dataclass(frozen=True)
class ReaperConfig:
    topics: Topics
    job_partitions: int
    execution_partitions: int
    redelivery_cap: int = 3
    tenant_shards: Mapping[str, int] = field(default_factory=dict)
    name: str = "reaper"


@dataclass
class Lease:
    delivery: int
    worker: str
    expires_ms: int
    execution: bytes | None
    """The execution's Avro bytes, from the `acquired` event."""
    active: bool = True
    """False once redelivered or given up: only remembered to ignore stale events."""

    def dump(self) -> bytes:
        body = {
            "d": self.delivery,
            "w": self.worker,
            "x": self.expires_ms,
            "a": self.active,
            "e": base64.b64encode(self.execution).decode() if self.execution else None,
        }
        return json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def load(cls, raw: bytes) -> Lease:
        b = json.loads(raw)
        execution = base64.b64decode(b["e"]) if b["e"] else None
        return cls(b["d"], b["w"], b["x"], execution, b["a"])


class ReaperProcessor:
    def __init__(
        self, cfg: ReaperConfig, codec: Codec, metrics: ReaperMetrics | None = None
    ) -> None:
        self.cfg = cfg
        self.codec = codec
        self.metrics = metrics or ReaperMetrics()

    # -- input -------------------------------------------------------------------------------

    def process(self, task: Task, record: InputRecord, now_ms: int) -> None:
        try:
            event = LEASES.decode(self.codec, record.value)
        except DecodeError as exc:
            self._reject(task, record, exc.code, str(exc), now_ms)
            return
        assert isinstance(event, LeaseEvent)
        key = event.execution_id.encode()
        raw = task.get(key)
        lease = Lease.load(raw) if raw is not None else None
        stale = lease is not None and (
            event.delivery < lease.delivery
            or (not lease.active and event.delivery == lease.delivery)
        )
        if lease is not None and stale:
            self.metrics.stale_events.inc()
            log.info(
                "stale %s of %s delivery %d (current %d): ignored",
                event.event.value,
                event.execution_id,
                event.delivery,
                lease.delivery,
            )
            return
        expires = int(event.expires_at.timestamp() * 1000)
        if event.event is LeaseEventKind.released:
            task.put(key, None, None)
            return
        if event.event is LeaseEventKind.renewed and lease is not None:
            lease.expires_ms = max(lease.expires_ms, expires)
            lease.worker = event.worker_id
        else:
            execution = (
                self.codec.encode(event.execution)
                if event.execution is not None
                else (lease.execution if lease is not None else None)
            )
            lease = Lease(event.delivery, event.worker_id, expires, execution)
        task.put(key, lease.dump(), lease.expires_ms + LEASE_GRACE_MS)

    # -- timers ------------------------------------------------------------------------------

    def fire(self, task: Task, key: bytes, now_ms: int) -> None:
        raw = task.get(key)
        if raw is None:
            return
        lease = Lease.load(raw)
        if not lease.active:
            task.put(key, None, None)  # remembered long enough
            return
        if lease.expires_ms + LEASE_GRACE_MS > now_ms:
            return
        if lease.execution is None:
            log.error("lease of %s expired and its execution is unknown", key.decode())
            task.put(key, None, None)
            return
        ex = self.codec.decode_as(lease.execution, ExecutionRequested)
        self.metrics.expiries.inc()
        if lease.delivery < self.cfg.redelivery_cap:
            self._redeliver(task, ex, lease, now_ms)
            self.metrics.redeliveries.inc()
        else:
            self._give_up(task, ex, lease, now_ms)
            self.metrics.gave_up.inc()
        lease.active = False
        task.put(key, lease.dump(), now_ms + FORGET_AFTER_MS)

    def _redeliver(self, task: Task, ex: ExecutionRequested, lease: Lease, now_ms: int) -> None:
        again = ex.model_copy(
            update={
                "delivery": lease.delivery + 1,
                "trigger": TriggerKind.redelivery,
                "dispatched_at": ms_to_datetime(now_ms),
            }
        )
        route = execution_route(ex.tenant, ex.job_id, self.cfg.tenant_shards)
        partition = partition_for(route, self.cfg.execution_partitions)
        self._emit(task, self.cfg.topics.executions, partition, ex.tenant, again)
        why = (
            f"lease of delivery {lease.delivery} (worker {lease.worker}) expired at "
            f"{ms_to_datetime(lease.expires_ms).isoformat()} without an outcome"
        )
        self._history(task, ex, Decision.redelivered, now_ms, why, delivery=lease.delivery + 1)

    def _give_up(self, task: Task, ex: ExecutionRequested, lease: Lease, now_ms: int) -> None:
        message = (
            f"the lease expired on {lease.delivery} deliveries in a row (cap "
            f"{self.cfg.redelivery_cap}): the job may be killing or hanging its workers"
        )
        outcome = ExecutionOutcome(
            execution_id=ex.execution_id,
            tenant=ex.tenant,
            job_id=ex.job_id,
            attempt=ex.attempt,
            delivery=lease.delivery,
            worker_id=REAPER_ID,
            status=OutcomeStatus.failed,
            retryable=False,
            error=ErrorInfo(type="RedeliveryCap", message=message),
            nominal_at=ex.nominal_at,
            due_at=ex.due_at,
            started_at=ms_to_datetime(now_ms),
            finished_at=ms_to_datetime(now_ms),
        )
        partition = partition_for(ex.routing_key, self.cfg.job_partitions)
        self._emit(task, self.cfg.topics.outcomes, partition, ex.key, outcome)

    def _history(
        self,
        task: Task,
        ex: ExecutionRequested,
        decision: Decision,
        now_ms: int,
        reason: str,
        *,
        delivery: int,
    ) -> None:
        record = HistoryRecord(
            tenant=ex.tenant,
            job_id=ex.job_id,
            decision=decision,
            at=ms_to_datetime(now_ms),
            execution_id=ex.execution_id,
            nominal_at=ex.nominal_at,
            due_at=ex.due_at,
            attempt=ex.attempt,
            delivery=delivery,
            reason=reason,
        )
        partition = partition_for(ex.routing_key, self.cfg.job_partitions)
        self._emit(task, self.cfg.topics.history, partition, ex.key, record)

    def _emit(self, task: Task, topic: str, partition: int, key: str, record: WireModel) -> None:
        headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        task.emit(topic, partition, key.encode(), self.codec.encode(record), headers)

    def refuse(self, task: Task, record: InputRecord, exc: Exception, now_ms: int) -> None:
        """Applying a lease event raised and was undone: a `rejected` record says why."""
        code, reason = why_refused(record, exc)
        self.metrics.failures.labels("refused").inc()
        self._reject(task, record, code, reason, now_ms)

    def quarantine(self, task: Task, key: bytes, exc: Exception, now_ms: int) -> None:
        """Handling an expired lease raised and was undone: the lease is kept but leaves the
        expiry index, so the loop goes on; a history record (when the execution id names a job),
        a log line and a metric say that this execution needs an operator."""
        log.error("expired lease %r failed; quarantined", key, exc_info=exc)
        raw = task.get(key)
        if raw is not None:
            task.put(key, raw, None)
        self.metrics.failures.labels("quarantined").inc()
        job_key = key.decode(errors="replace").partition("@")[0]
        tenant, _, job_id = job_key.partition("/")
        if not (IDENT_RE.fullmatch(tenant) and IDENT_RE.fullmatch(job_id)):
            return
        record = HistoryRecord(
            tenant=tenant,
            job_id=job_id,
            decision=Decision.quarantined,
            at=ms_to_datetime(now_ms),
            execution_id=key.decode(errors="replace")[:400],
            reason=f"the reaper could not handle this expired lease: {type(exc).__name__}: {exc}"[
                :2048
            ],
        )
        partition = partition_for(job_key, self.cfg.job_partitions)
        self._emit(task, self.cfg.topics.history, partition, job_key, record)

    def prefetch(self, task: Task, key: bytes) -> None:
        pass

    def maintain(self, task: Task, now_ms: int) -> bool:
        return True

    def _reject(self, task: Task, record: InputRecord, code: str, reason: str, now_ms: int) -> None:
        reject(
            task,
            self.codec,
            to_topic=self.cfg.topics.rejected,
            processor=self.cfg.name,
            record=record,
            code=code,
            reason=reason,
            now_ms=now_ms,
        )
