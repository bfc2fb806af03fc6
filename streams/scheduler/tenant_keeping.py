"""What the scheduler keeps per tenant: its retry circuit breaker (a copy per partition under
`~breaker/<tenant>`, cached decoded; an open or a close is told to every partition, so the
tenant has one circuit and is told of it) and its backfill pace (in memory)."""

from __future__ import annotations

import logging

from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import TenantCircuit
from kadence.topics import Topics
from streams.runtime.context import ProcessorContext
from streams.scheduler.breaker import Breaker
from streams.scheduler.metrics import SchedulerMetrics

log = logging.getLogger("streams.scheduler.processor")
BREAKER_PREFIX = b"~breaker/"


class Breakers:
    """Each tenant's retry circuit breaker on this partition."""

    def __init__(
        self, codec: Codec, topics: Topics, job_partitions: int, metrics: SchedulerMetrics
    ) -> None:
        self.codec = codec
        self.topics = topics
        self.job_partitions = job_partitions
        self.metrics = metrics

    def put(self, ctx: ProcessorContext, tenant: str, breaker: Breaker, change: str | None) -> None:
        """Store the tenant's breaker; when this partition opened or closed the circuit, tell
        every other partition, and itself: the ingress tells the tenant from that copy
        (streams/ingress/events.py)."""
        if change:
            log.warning("tenant %s: retry circuit %s (partition %d)", tenant, change, ctx.partition)
            self.metrics.circuit_changes.labels(self.metrics.tenant(tenant), change).inc()
        key = BREAKER_PREFIX + tenant.encode()
        if change is None:  # counted: written once a transaction, however many it counted
            ctx.keep(key, breaker, Breaker.dump)
            return
        ctx.put(key, breaker.dump(), None)
        ctx.cache[key] = breaker
        if change in ("opened", "closed"):
            told = TenantCircuit(
                tenant=tenant,
                partition=ctx.partition,
                at=ms_to_datetime(breaker.changed_ms),
                open_until=None
                if change == "closed"
                else ms_to_datetime(breaker.open_until_ms or 0),
                reason=f"{breaker.failures} of {breaker.attempts} attempts failed"
                if change == "opened"
                else "a probe succeeded",
            )
            value = self.codec.encode(told)
            headers = headers_for(told, self.codec.schema_fingerprint(TenantCircuit))
            control = self.topics.scheduler_control
            for partition in range(self.job_partitions):  # its own copy tells the tenant
                ctx.forward(control, partition, tenant.encode(), value, headers)

    def heard(self, ctx: ProcessorContext, told: TenantCircuit) -> None:
        """Another partition opened or closed the tenant's circuit: this copy follows unless it
        changed later itself (it does not tell the others again)."""
        if told.partition == ctx.partition:
            return
        breaker = self.get(ctx, told.tenant)
        changed = Breaker.load(breaker.dump())
        until = None if told.open_until is None else int(told.open_until.timestamp() * 1000)
        did = changed.heard(until, int(told.at.timestamp() * 1000))
        if did is not None:
            log.warning(
                "tenant %s: retry circuit %s (partition %d)", told.tenant, did, ctx.partition
            )
            key = BREAKER_PREFIX + told.tenant.encode()
            ctx.put(key, changed.dump(), None)
            ctx.cache[key] = changed

    def get(self, ctx: ProcessorContext, tenant: str) -> Breaker:
        """The tenant's breaker, decoded once and cached (the domain never changes it in
        place: it returns a changed copy in `Effects.breaker`)."""
        key = BREAKER_PREFIX + tenant.encode()
        cached = ctx.cache.get(key)
        if isinstance(cached, Breaker):
            return cached
        breaker = Breaker.load(ctx.get(key))
        ctx.cache[key] = breaker
        return breaker


class BackfillPace:
    """Backfill runs each tenant's jobs started in the current second, over every partition
    of the process: a tenant starts `per_s` a second at most. Kept in memory: after a restart
    a tenant may get one extra second's worth, never more."""

    def __init__(self, per_s: int) -> None:
        self.per_s = per_s
        self._paced: dict[str, tuple[int, int]] = {}
        """tenant -> (second, backfill runs started in it)."""

    def budget(self, tenant: str, now_ms: int) -> int:
        """Backfill runs the tenant may still start in this second."""
        second, used = self._paced.get(tenant, (0, 0))
        return self.per_s - (used if second == now_ms // 1000 else 0)

    def used(self, tenant: str, used: int, now_ms: int) -> None:
        """The tenant's jobs started `used` backfill runs now."""
        second, before = self._paced.get(tenant, (0, 0))
        now_s = now_ms // 1000
        self._paced[tenant] = (now_s, used + (before if second == now_s else 0))
        if len(self._paced) > 10_000:  # tenants seen long ago have nothing left to pace
            self._paced = {t: v for t, v in self._paced.items() if v[0] == now_s}
