"""Prometheus metrics of the ingress (served when KADENCE_METRICS_PORT is set). A batch's counts
are added once its transaction committed: a batch read again after an abort is counted once."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter

from kadence.metrics import TenantLabels

ACCEPTED = "accepted"
REJECTED = "rejected"
TOLD = "told"
UNTOLD = "untold"


class IngressMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.tenant = TenantLabels()
        self.records = Counter(
            "kadence_ingress_records",
            "Records of the tenants' ingress topics, by tenant (from the topic's name; empty "
            "for a topic that names none) and result: accepted (written to Kadence's topics) "
            "or rejected (written to `rejected` with the reason)",
            ["tenant", "result"],
            registry=self.registry,
        )
        self.events = Counter(
            "kadence_ingress_events",
            "Events for the tenants' events topics: told (written), untold (the tenant's "
            "events topic could not be made: the log says why)",
            ["result"],
            registry=self.registry,
        )
        self.aborts = Counter(
            "kadence_ingress_transactions_aborted",
            "Batches whose transaction did not commit (read again from their start)",
            registry=self.registry,
        )

    def committed(self, records: Tally[tuple[str, str]], events: Tally[str]) -> None:
        """Add one committed batch: records per (tenant, result), events per result."""
        for (tenant, result), n in records.items():
            self.records.labels(self.tenant(tenant) if tenant else "", result).inc(n)
        for result, n in events.items():
            self.events.labels(result).inc(n)
