"""The reaper as a runtime processor: a lease table with an expiry timer per entry.

Input: `leases`. A `LeaseSnapshot` (keyed `worker/incarnation`) lists everything one worker
process holds, by (executions partition, offset): one entry per incarnation keeps its latest
ranges and their expiries (`snapshots`); an expired ref is read back from `executions` through
the `ExecutionReader` port (a batch's executions are claimed together, under its offset: each
is handed on). A `LeaseEvent` (keyed by execution id; workers of earlier releases,
or `lease_format=events`) keeps one entry per execution with its delivery, worker, expiry and
the execution itself (`leases`). When a lease expires without a release (the worker writes its
outcome and the release in one transaction):
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

from kadence import batches
from kadence.codec import Codec
from kadence.errors import DecodeError
from kadence.headers import headers_for
from kadence.models import (
    ExecutionBatch,
    ExecutionRequested,
    LeaseEvent,
    LeaseSnapshot,
    WireModel,
)
from kadence.models.base import DEFAULT_POOL
from kadence.partitioning import execution_route, partition_for
from kadence.pools import pool_topic
from kadence.topics import EXECUTIONS, LEASES, Topics
from streams.reaper import leases, snapshots
from streams.reaper.leases import Expiry, Lease, Verdict
from streams.reaper.metrics import ReaperMetrics
from streams.reaper.reader import ExecutionReader
from streams.reaper.snapshots import Held
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
        self,
        cfg: ReaperConfig,
        codec: Codec,
        metrics: ReaperMetrics | None = None,
        reader: ExecutionReader | None = None,
        pool_readers: Mapping[str, ExecutionReader] | None = None,
    ) -> None:
        self.cfg = cfg
        self.codec = codec
        self.metrics = metrics or ReaperMetrics()
        self.reader = reader
        """Reads expired snapshot refs back from `executions` (None: a reaper that only
        reads lease events; an expired snapshot ref then raises and is quarantined)."""
        self.readers = {**(pool_readers or {}), DEFAULT_POOL: reader}
        """The same for each worker pool's executions topic (KADENCE_POOLS)."""

    # -- input -------------------------------------------------------------------------------

    def process(self, ctx: ProcessorContext, record: InputRecord, now_ms: int) -> None:
        try:
            event = LEASES.decode(self.codec, record.value)
        except DecodeError as exc:
            self._reject(ctx, record, exc.code, str(exc), now_ms)
            return
        if isinstance(event, LeaseSnapshot):
            self._snapshot(ctx, event, now_ms)
            return
        assert isinstance(event, LeaseEvent)
        key = event.execution_id.encode()
        raw = ctx.get(key)
        lease = Lease.load(raw) if raw is not None else None
        if lease is not None and leases.is_stale(lease, event, self.codec):
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

    def _snapshot(self, ctx: ProcessorContext, snap: LeaseSnapshot, now_ms: int) -> None:
        key = snapshots.store_key(snap.key)
        raw = ctx.get(key)
        held = Held.load(raw) if raw is not None else None
        if snapshots.is_stale(held, snap):
            self.metrics.stale_events.inc()
            log.info("stale lease snapshot of %s at %s: ignored", snap.key, snap.at.isoformat())
            return
        entry = snapshots.on_snapshot(held, snap, now_ms)
        ctx.put(key, entry.held.dump() if entry.held else None, entry.wake_ms)

    # -- timers ------------------------------------------------------------------------------

    def fire(self, ctx: ProcessorContext, key: bytes, now_ms: int) -> None:
        raw = ctx.get(key)
        if raw is None:
            return
        if snapshots.is_snapshot_key(key):
            self._expire_refs(ctx, key, Held.load(raw), now_ms)
            return
        expiry = leases.on_timer(Lease.load(raw), now_ms, self.cfg.redelivery_cap, self.codec)
        if expiry.verdict is Verdict.wait:
            return
        if expiry.verdict is Verdict.unknown:
            log.error("lease of %s expired and its execution is unknown", key.decode())
        self._write(ctx, expiry)
        entry = expiry.entry
        ctx.put(key, entry.lease.dump() if entry.lease else None, entry.wake_ms)

    def _expire_refs(self, ctx: ProcessorContext, key: bytes, held: Held, now_ms: int) -> None:
        """A worker incarnation's timer: every expired ref it still held is read back and
        redelivered (or given up at the cap); one the reader cannot tell about now (its
        partition's leader down) is read again a second later, and one that is gone, or still
        unreadable UNREAD_GIVE_UP_MS after its lease expired, is quarantined."""
        due = snapshots.expired(held, now_ms)
        unread: list[snapshots.Ref] = []
        if due:
            reader = self.readers.get(held.pool)
            if reader is None:
                raise RuntimeError(f"lease snapshots of pool {held.pool!r} need a reader")
            values = reader.read([ref for ref, _ in due])
            for ref, expires_ms in due:
                if ref not in values and now_ms - expires_ms < snapshots.UNREAD_GIVE_UP_MS:
                    unread.append(ref)  # the reader could not tell (a leader down): again later
                    continue
                self._expire_ref(ctx, held, (ref, expires_ms), values.get(ref), now_ms)
        pending = set(unread)
        handled = [ref for ref, _ in due if ref not in pending]
        entry = snapshots.settle(held, handled, now_ms, unread)
        ctx.put(key, entry.held.dump() if entry.held else None, entry.wake_ms)

    def _expire_ref(
        self,
        ctx: ProcessorContext,
        held: Held,
        expired: tuple[snapshots.Ref, int],
        value: bytes | None,
        now_ms: int,
    ) -> None:
        ref, expires_ms = expired
        record: object = None
        if value is None:
            why = "could not be read back (deleted by retention, or the read timed out)"
        else:
            try:
                record = EXECUTIONS.decode(self.codec, value)
                why = f"is a {type(record).__name__}, not an execution"
            except DecodeError as exc:
                why = f"is not a readable execution ({exc.code}: {exc})"
        if isinstance(record, ExecutionBatch):  # claimed together: each is handed on
            for i in range(len(record.executions)):
                try:
                    ex = batches.entry(self.codec, record, i)
                except DecodeError as exc:
                    why = f"has an unreadable execution at entry {i} ({exc.code}: {exc})"
                    self._quarantine(ctx, ref, held, why, record, now_ms)
                    continue
                self._expire(ctx, ex, held, expires_ms, now_ms)
            return
        if isinstance(record, ExecutionRequested):
            self._expire(ctx, record, held, expires_ms, now_ms)
            return
        self._quarantine(ctx, ref, held, why, record, now_ms)

    def _expire(
        self,
        ctx: ProcessorContext,
        ex: ExecutionRequested,
        held: Held,
        expires_ms: int,
        now_ms: int,
    ) -> None:
        expiry = leases.decide(
            ex,
            delivery=ex.delivery,
            worker=held.worker,
            expires_ms=expires_ms,
            now_ms=now_ms,
            redelivery_cap=self.cfg.redelivery_cap,
        )
        self._write(ctx, expiry)

    def _quarantine(  # noqa: PLR0917 - one expired reference's parts
        self,
        ctx: ProcessorContext,
        ref: snapshots.Ref,
        held: Held,
        why: str,
        record: object,
        now_ms: int,
    ) -> None:
        reason, history = snapshots.unusable(ref, held.worker, why, record, now_ms)
        log.error("%s; quarantined", reason)
        self.metrics.failures.labels("quarantined").inc()
        if history is not None:
            partition = partition_for(history.key, self.cfg.job_partitions)
            self._forward(ctx, self.cfg.topics.history, partition, history.key, history)

    def _write(self, ctx: ProcessorContext, expiry: Expiry) -> None:
        """The redelivery and its history record, or the cap's outcome."""
        ex = expiry.execution
        if ex is not None:
            self.metrics.expiries.inc()
            job_partition = partition_for(ex.routing_key, self.cfg.job_partitions)
            if expiry.redelivery is not None:
                route = execution_route(ex.tenant, ex.job_id, self.cfg.tenant_shards)
                partition = partition_for(route, self.cfg.execution_partitions)
                topic = pool_topic(self.cfg.topics, ex.target.pool)
                self._forward(ctx, topic, partition, ex.tenant, expiry.redelivery)
            if expiry.history is not None:
                self._forward(ctx, self.cfg.topics.history, job_partition, ex.key, expiry.history)
            if expiry.outcome is not None:
                self._forward(ctx, self.cfg.topics.outcomes, job_partition, ex.key, expiry.outcome)
            if expiry.verdict is Verdict.redeliver:
                self.metrics.redeliveries.inc()
            else:
                self.metrics.gave_up.inc()

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
