"""Fairness between tenants in a worker: weights of the round robin over due executions, and
each tenant's running cap (see `inbox`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from kadence.settings import KadenceSettings


@dataclass(frozen=True)
class Fairness:
    weights: Mapping[str, float] = field(default_factory=dict)
    """tenant -> executions started per round (default 1; 0.5 starts one every other round)."""
    max_running: int = 0
    """Executions of one tenant running at once in this worker at most (0: no cap)."""
    by_tenant: bool = True
    """False: one queue for everyone, in due order (no fairness and no cap; for comparison)."""
    caps: Mapping[str, int] = field(default_factory=dict)
    """tenant -> its own `max_running` (0: no cap)."""

    @classmethod
    def of(cls, settings: KadenceSettings) -> Fairness:
        """A worker's fairness by its settings: unless told otherwise, a tenant holds at most
        `worker_tenant_max_share` of the slots, so runs that hang for hours cannot take them
        all."""
        return cls(
            settings.worker_tenant_weights,
            default_max_running(settings),
            by_tenant=settings.worker_fairness == "drr",
            caps=settings.worker_tenant_max_running_by_tenant,
        )

    def weight(self, tenant: str) -> float:
        return max(0.01, self.weights.get(tenant, 1.0))

    def cap(self, tenant: str) -> int:
        """Runs of `tenant` at once at most (0: no cap)."""
        return self.caps.get(tenant, self.max_running)


def default_max_running(settings: KadenceSettings) -> int:
    """The cap of a tenant not named in `worker_tenant_max_running_by_tenant`: the explicit
    number if there is one, else the share of the slots (at least 1; 0 when the share is all)."""
    if settings.worker_tenant_max_running is not None:
        return settings.worker_tenant_max_running
    slots = settings.worker_concurrency
    share = max(1, math.floor(slots * settings.worker_tenant_max_share + 1e-9))
    return 0 if share >= slots else share
