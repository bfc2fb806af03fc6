"""Fairness between tenants in a worker.

Executions that are due wait in one queue per tenant, and `Inbox.due` serves the queues by
weighted deficit round robin (each round a tenant may start `weight` more, a fraction carried
to the next round), skipping a tenant at its running cap. A tenant that floods its partition
with a hundred thousand executions due at midnight therefore delays another tenant's execution
due at midnight by one round, not by its hundred thousand. The running cap (by default half the
worker's slots) keeps slots free for the others when one tenant's runs hang for hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kadence.settings import KadenceSettings
from streams.worker.item import Item


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
    async_cap: int = 0
    """Runs without a thread of one tenant in flight at once at most (0: no cap): its share of
    `worker_async_max_in_flight`."""

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
            async_cap=_share(settings.worker_async_max_in_flight, settings),
        )

    def weight(self, tenant: str) -> float:
        return max(0.01, self.weights.get(tenant, 1.0))

    def cap(self, tenant: str) -> int:
        """Runs of `tenant` at once at most (0: no cap)."""
        return self.caps.get(tenant, self.max_running)


def never(_item: Item) -> bool:
    return False


@dataclass
class Budget:
    """What one `Inbox.due` call may still hand out."""

    slots: int
    room: int
    slotless: Callable[[Item], bool]
    loose: int
    """Runs without a thread that may still start; `loose_busy`: tenant -> those in flight."""
    loose_busy: dict[str, int] = field(default_factory=dict)
    leaseless: int | None = None
    """Leaseless runs (delivered in this turn's transaction) that may still go: what one
    transaction delivers at most (None: no bound). Handing out more only sends them back."""

    def admits(self, item: Item, tenant: str, tenant_busy: int, caps: tuple[int, int]) -> bool:
        if item.leaseless:  # delivered in this turn's transaction: holds nothing afterwards
            return self.leaseless is None or self.leaseless > 0
        if not item.claimed and self.room <= 0:
            return False
        if self.slotless(item):
            return self.loose > 0 and (not caps[1] or self.loose_busy.get(tenant, 0) < caps[1])
        return self.slots > 0 and (not caps[0] or tenant_busy < caps[0])

    def take(self, item: Item, tenant: str) -> bool:
        """Count `item` in (a batch: each of its executions, so it may take a budget past 0 by
        less than a batch); whether it took slots."""
        n = item.weight
        if item.leaseless:
            if self.leaseless is not None:
                self.leaseless -= n
            return False
        if not item.claimed:
            self.room -= n
        if self.slotless(item):
            self.loose -= n
            self.loose_busy[tenant] = self.loose_busy.get(tenant, 0) + n
            return False
        self.slots -= n
        return True


def default_max_running(settings: KadenceSettings) -> int:
    """The cap of a tenant not named in `worker_tenant_max_running_by_tenant`: the explicit
    number if there is one, else the share of the slots (at least 1; 0 when the share is all)."""
    if settings.worker_tenant_max_running is not None:
        return settings.worker_tenant_max_running
    return _share(settings.worker_concurrency, settings)


def _share(slots: int, settings: KadenceSettings) -> int:
    share = max(1, math.floor(slots * settings.worker_tenant_max_share + 1e-9))
    return 0 if share >= slots else share
