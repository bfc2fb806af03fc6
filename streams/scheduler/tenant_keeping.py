"""What the scheduler keeps per tenant: its retry circuit breaker (stored per partition
under `~breaker/<tenant>`, cached decoded) and its backfill pace (in memory)."""

from __future__ import annotations

import logging

from streams.runtime.context import ProcessorContext
from streams.scheduler.breaker import Breaker

log = logging.getLogger("streams.scheduler.processor")
BREAKER_PREFIX = b"~breaker/"


class TenantKeeping:
    """Mixed into the scheduler processor."""

    _paced: dict[str, tuple[int, int]]
    """tenant -> (second, backfill runs started in it): the backfill pace. Kept in memory:
    after a restart a tenant may get one extra second's worth, never more."""

    def _put_breaker(
        self, ctx: ProcessorContext, tenant: str, breaker: Breaker, change: str | None
    ) -> None:
        if change:
            log.warning("tenant %s: retry circuit %s (partition %d)", tenant, change, ctx.partition)
        key = BREAKER_PREFIX + tenant.encode()
        ctx.put(key, breaker.dump(), None)
        ctx.cache[key] = breaker

    def _pace(self, tenant: str, used: int, now_ms: int) -> None:
        second, before = self._paced.get(tenant, (0, 0))
        now_s = now_ms // 1000
        self._paced[tenant] = (now_s, used + (before if second == now_s else 0))
        if len(self._paced) > 10_000:  # tenants seen long ago have nothing left to pace
            self._paced = {t: v for t, v in self._paced.items() if v[0] == now_s}

    def _breaker(self, ctx: ProcessorContext, tenant: str) -> Breaker:
        """The tenant's breaker, decoded once and cached (the domain never changes it in
        place: it returns a changed copy in `Effects.breaker`)."""
        key = BREAKER_PREFIX + tenant.encode()
        cached = ctx.cache.get(key)
        if isinstance(cached, Breaker):
            return cached
        breaker = Breaker.load(ctx.get(key))
        ctx.cache[key] = breaker
        return breaker
