"""Prometheus metrics of a reaper."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from kadence.metrics import FAILURE_KINDS


class ReaperMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.expiries = Counter(
            "kadence_reaper_lease_expiries",
            "Leases that expired without an outcome",
            registry=self.registry,
        )
        self.redeliveries = Counter(
            "kadence_reaper_redeliveries",
            "Executions redelivered after an expired lease",
            registry=self.registry,
        )
        self.gave_up = Counter(
            "kadence_reaper_redelivery_cap_reached",
            "Executions given up at the redelivery cap (then dead-lettered)",
            registry=self.registry,
        )
        self.failures = Counter(
            "kadence_reaper_failures",
            "Lease events refused after an unexpected error (refused) and leases taken out of "
            "the expiry index after one while handling their expiry (quarantined)",
            ["kind"],
            registry=self.registry,
        )
        for kind in FAILURE_KINDS:  # at 0 from the start: the alerts see the first one
            self.failures.labels(kind)
        self.stale_events = Counter(
            "kadence_reaper_stale_lease_events",
            "Lease events of an older delivery than the current one (ignored)",
            registry=self.registry,
        )
