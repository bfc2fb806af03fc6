"""The reaper as a runtime processor: a lease table with an expiry timer per execution.

Input: `leases` (keyed by execution id). Per execution it keeps the current delivery, its
worker, the lease expiry and the execution itself (from the `acquired` event). When a lease
expires with no `released` (the worker writes its outcome and the release in one transaction):
- below the redelivery cap: the same execution, `delivery + 1`, trigger `redelivery`, goes back
  on `executions`, with a `redelivered` history record;
- at the cap: a non-retryable `failed` outcome (`REDELIVERY_CAP_ERROR`) goes to `outcomes`, and
  the scheduler dead-letters it: a job that kills every worker that runs it stops there.
Events of an older delivery than the current one (a worker that was paused past its lease)
change nothing. The decisions are in `leases`; this module decodes, writes and routes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.headers import headers_for
from kadence.models import LeaseEvent, WireModel
from kadence.partitioning import execution_route, partition_for
from kadence.topics import LEASES, Topics
from streams.reaper import leases
from streams.reaper.leases import Lease, Verdict
from streams.reaper.metrics import ReaperMetrics
from streams.runtime.context import ProcessorContext
from streams.runtime.records import InputRecord
from streams.runtime.reject import reject, why_refused

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReaperConfig:
    topics: Topics
    job_partitions: int
    execution_partitions: int
    redelivery_cap: int = 3
    tenant_shards: Mapping[str, int] = field(default_factory=dict)
    name: str = "reaper"


class ReaperProcessor:
    def __init__(
        self, cfg: ReaperConfig, codec: Codec, metrics: ReaperMetrics | None = None
    ) -> None:
        self.cfg = cfg
        self.codec = codec
        self.metrics = metrics or ReaperMetrics()

    # -- input -------------------------------------------------------------------------------

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        try:
            event = LEASES.decode(self.codec, record.value)
        except DecodeError as exc:
            self._reject(ctx, record, exc.code, str(exc), now_ms)
            return
        assert isinstance(event, LeaseEvent)
        key = event.execution_id.encode()
        raw = ctx.get(key)
        lease = Lease.load(raw) if raw is not None else None
        if lease is not None and leases.is_stale(lease, event):
            self.metrics.stale_events.inc()
            log.info(
                "stale %s of %s delivery %d (current %d): ignored",
                event.event.value,
                event.execution_id,
                event.delivery,
                lease.delivery,
            )
            return
        entry = leases.on_event(lease, event, self.codec)
        ctx.put(key, entry.lease.dump() if entry.lease else None, entry.wake_ms)

    # -- timers ------------------------------------------------------------------------------

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        raw = ctx.get(key)
        if raw is None:
            return
        expiry = leases.on_timer(Lease.load(raw), now_ms, self.cfg.redelivery_cap, self.codec)
        if expiry.verdict is Verdict.wait:
            return
        if expiry.verdict is Verdict.unknown:
            log.error("lease of %s expired and its execution is unknown", key.decode())
        ex = expiry.execution
        if ex is not None:
            self.metrics.expiries.inc()
            job_partition = partition_for(ex.routing_key, self.cfg.job_partitions)
            if expiry.redelivery is not None:
                route = execution_route(ex.tenant, ex.job_id, self.cfg.tenant_shards)
                partition = partition_for(route, self.cfg.execution_partitions)
                self._forward(
                    ctx, self.cfg.topics.executions, partition, ex.tenant, expiry.redelivery
                )
            if expiry.history is not None:
                self._forward(ctx, self.cfg.topics.history, job_partition, ex.key, expiry.history)
            if expiry.outcome is not None:
                self._forward(ctx, self.cfg.topics.outcomes, job_partition, ex.key, expiry.outcome)
            if expiry.verdict is Verdict.redeliver:
                self.metrics.redeliveries.inc()
            else:
                self.metrics.gave_up.inc()
        entry = expiry.entry
        ctx.put(key, entry.lease.dump() if entry.lease else None, entry.wake_ms)

    def _forward(
        self, ctx: ProcessorContext, topic: str, partition: int, key: str, record: WireModel
    ) -> None:
        headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        ctx.forward(topic, partition, key.encode(), self.codec.encode(record), headers)

    def refuse(
        self, ctx: ProcessorContext, record: InputRecord, exc: Exception, now_ms: int
    ) -> None:
        """Applying a lease event raised and was undone: a `rejected` record says why."""
        code, reason = why_refused(record, exc)
        self.metrics.failures.labels("refused").inc()
        self._reject(ctx, record, code, reason, now_ms)

    def quarantine(self, ctx: ProcessorContext, key: bytes, exc: Exception, now_ms: int) -> None:
        """Handling an expired lease raised and was undone: the lease is kept but leaves the
        expiry index, so the loop goes on; a history record (when the execution id names a job),
        a log line and a metric say that this execution needs an operator."""
        log.error("expired lease %r failed; quarantined", key, exc_info=exc)
        raw = ctx.get(key)
        if raw is not None:
            ctx.put(key, raw, None)
        self.metrics.failures.labels("quarantined").inc()
        record = leases.quarantined(key, exc, now_ms)
        if record is not None:
            partition = partition_for(record.key, self.cfg.job_partitions)
            self._forward(ctx, self.cfg.topics.history, partition, record.key, record)

    def prefetch(self, ctx: ProcessorContext, key: bytes) -> None:
        pass

    def maintain(self, ctx: ProcessorContext, now_ms: int) -> bool:
        return True

    def _reject(
        self, ctx: ProcessorContext, record: InputRecord, code: str, reason: str, now_ms: int
    ) -> None:
        reject(
            ctx,
            self.codec,
            to_topic=self.cfg.topics.rejected,
            processor=self.cfg.name,
            record=record,
            code=code,
            reason=reason,
            now_ms=now_ms,
        )
