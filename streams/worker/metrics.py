"""Prometheus metrics of a worker (served when KADENCE_METRICS_PORT is set)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kadence.metrics import LATENESS_BUCKETS, TenantLabels


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.tenant = TenantLabels()
        self.started_total = Counter(
            "kadence_worker_executions_started",
            "Executions claimed and started",
            ["tenant"],
            registry=self.registry,
        )
        self.finished_total = Counter(
            "kadence_worker_executions_finished",
            "Executions finished, by outcome",
            ["tenant", "status"],
            registry=self.registry,
        )
        self.start_lateness = Histogram(
            "kadence_worker_start_lateness_seconds",
            "Start time minus due time",
            ["tenant"],
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self.renewals = Counter(
            "kadence_worker_lease_renewals", "Lease renewals committed", registry=self.registry
        )
        self.lease_lost = Counter(
            "kadence_worker_leases_lost",
            "Runs stopped because their lease expired before a renewal committed",
            registry=self.registry,
        )

        self.inbox = Gauge(
            "kadence_worker_inbox",
            "The inbox: executions held read but not claimed (`executions`, their `bytes` as "
            "read), and executions read and let go to be read again (`owed`)",
            ["what"],
            registry=self.registry,
        )

    def started(self, tenant: str, lateness_s: float) -> None:
        label = self.tenant(tenant)
        self.started_total.labels(label).inc()
        self.start_lateness.labels(label).observe(lateness_s)

    def finished(self, tenant: str, status: str) -> None:
        self.finished_total.labels(self.tenant(tenant), status).inc()
