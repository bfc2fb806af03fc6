"""What the outcomes of one worker's batch share while they are taken as one unit of work
(`SchedulerProcessor.process_together`, `Together` in streams/runtime/processor.py).

A worker writes a batch of outcomes as one record (outcome_batches.py), most of them quiet
successes (later.py) of a few tenants' jobs. Taken one unit each, every success made its
tenant's facts (its caps and what it used of them), copied its tenant's breaker to count one
attempt in, kept the copy for the commit and counted a metric. Taken together, a run of quiet
successes makes a tenant's facts once, counts its attempts in place in the breaker copy this
unit kept, and adds the metric once. After an outcome applied at once the facts are made
again (what it writes may start runs or hold places); a breaker it replaced is no longer the
copy this unit counts in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.scheduler.breaker import Breaker
from streams.scheduler.step import Facts


@dataclass(slots=True)
class Shared:
    """What one batch's quiet successes share (the runtime's `Together` is the protocol that
    hands the batch over; this is the scheduler's side of it)."""

    facts: dict[str, Facts] = field(default_factory=dict)
    """The facts a tenant's quiet successes are judged with (`keeps_early`); only for a tenant
    without a cap on runs in progress (a quiet success changes that count)."""
    breakers: dict[str, Breaker] = field(default_factory=dict)
    """The breaker copy this unit made and kept for each tenant: counted in place after that
    while it is still the one kept (`owns`)."""
    deferred: int = 0
    """Quiet successes deferred, counted once at the end."""

    def owns(self, tenant: str, breaker: Breaker) -> bool:
        """`breaker` (the tenant's as kept now) is the copy this unit made: nothing else
        replaced it since, and no one else holds it."""
        return self.breakers.get(tenant) is breaker

    def applied(self) -> None:
        """An outcome is applied at once: the facts made before are not used again (what it
        writes may start runs or hold places). The breaker copies stay: one that outcome
        replaced is no longer the one kept (`owns`), and nothing changes a kept one in place."""
        self.facts.clear()
