"""Prometheus metrics of a worker (served when KADENCE_METRICS_PORT is set)."""

from __future__ import annotations

import bisect
import collections
import math

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kadence.metrics import LATENESS_BUCKETS, TenantLabels
from kadence.work_cpu import WorkCpu


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
        self.visible_lateness = Histogram(
            "kadence_worker_visible_lateness_seconds",
            "Kafka-topic runs delivered exactly once: the commit that made the record visible "
            "to read_committed consumers, minus the due time",
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
        self.throttled_total = Counter(
            "kadence_worker_throttled",
            "Runs that waited, once due, for their destination's rate limit (counted as they "
            "start), by tenant",
            ["tenant"],
            registry=self.registry,
        )
        self.throttled_seconds = Counter(
            "kadence_worker_throttled_seconds",
            "Time those runs waited for their destination's rate limit, by tenant",
            ["tenant"],
            registry=self.registry,
        )
        self._started: dict[str, tuple[Counter, Histogram]] = {}
        self._finished: dict[tuple[str, str], Counter] = {}
        self._delivered: dict[str, tuple[Counter, Counter, Histogram, Histogram]] = {}
        """Each label set's child, looked up once (`labels()` costs more than the increment,
        and a burst starts thousands of runs in one turn)."""

        self.inbox = Gauge(
            "kadence_worker_inbox",
            "The inbox: executions held read but not claimed (`executions`, their `bytes` as "
            "read), and executions read and let go to be read again (`owed`)",
            ["what"],
            registry=self.registry,
        )

        self.reading_paused = Counter(
            "kadence_worker_reading_paused",
            "Times this worker stopped reading with its inbox full (runs due soon wait behind "
            "what it holds until it resumes): more than now and then, and its inbox is smaller "
            "than its share of what the schedulers dispatch ahead",
            registry=self.registry,
        )

        self.due_not_started = Gauge(
            "kadence_worker_due_not_started",
            "Executions due and not started that this worker holds (read, waiting for a slot "
            "or their tenant's turn), by tenant",
            ["tenant"],
            registry=self.registry,
        )
        self.backlog = Gauge(
            "kadence_worker_backlog_records",
            "What this worker's partitions have waiting: the executions due and not started it "
            "holds, plus those not read yet or let go to read again (the consumer lag: due or "
            "not). Summed over a worker group, the signal to scale it on",
            registry=self.registry,
        )
        self._due_labels: set[str] = set()
        self.work = WorkCpu()
        """The loop thread's CPU by kind of work (streams/worker/loop.py): `read` (consuming and
        decoding executions), `claim` (what may start, claims, leases policed and renewed, the
        lease snapshot's records and the outcomes of runs that ended), `deliver` (the tenants'
        records of runs delivered in the transaction, and their outcomes), `commit` (the
        transaction's commit, and starting the runs it claimed)."""
        self.registry.register(self.work)

    def backlog_is(self, due: dict[str, int], lag: int) -> None:
        """Set both backlog gauges: `due` per tenant (each label's sum), `lag` records."""
        by_label: dict[str, int] = {}
        for tenant, n in due.items():
            label = self.tenant(tenant)
            by_label[label] = by_label.get(label, 0) + n
        for label in self._due_labels - by_label.keys():
            self.due_not_started.labels(label).set(0)  # drained: 0, not its last value
        for label, n in by_label.items():
            self.due_not_started.labels(label).set(n)
        self._due_labels |= by_label.keys()
        self.backlog.set(sum(by_label.values()) + lag)

    def started(self, tenant: str, lateness_s: float) -> None:
        label = self.tenant(tenant)
        children = self._started.get(label)
        if children is None:
            children = self.started_total.labels(label), self.start_lateness.labels(label)
            self._started[label] = children
        children[0].inc()
        children[1].observe(lateness_s)

    def throttled(self, tenant: str, wait_ms: int) -> None:
        label = self.tenant(tenant)
        self.throttled_total.labels(label).inc()
        self.throttled_seconds.labels(label).inc(wait_ms / 1000)

    def finished(self, tenant: str, status: str) -> None:
        key = (self.tenant(tenant), status)
        child = self._finished.get(key)
        if child is None:
            child = self._finished[key] = self.finished_total.labels(*key)
        child.inc()

    def visible(self, tenant: str, lateness_s: float) -> None:
        self.visible_lateness.labels(self.tenant(tenant)).observe(lateness_s)

    def delivered(self, tenant: str, lateness_s: list[float], visible_s: list[float]) -> None:
        """Runs of `tenant` delivered in one transaction, all succeeded (its children looked up
        once: a turn of a steady rate delivers a few runs of each tenant)."""
        label = self.tenant(tenant)
        children = self._delivered.get(label)
        if children is None:
            children = self._delivered[label] = (
                self.started_total.labels(label),
                self.finished_total.labels(label, "succeeded"),
                self.start_lateness.labels(label),
                self.visible_lateness.labels(label),
            )
        started, finished, late, visible = children
        started.inc(len(lateness_s))
        finished.inc(len(lateness_s))
        observe_all(late, lateness_s)
        observe_all(visible, visible_s)


def observe_all(histogram: Histogram, values: list[float]) -> None:
    """`histogram.observe(v)` for each of `values` (a labelled child), with one increment of
    its sum and one of a bucket per distinct value (the runs of one transaction share a handful
    of values: they started and became visible within the same milliseconds)."""
    try:
        total, bounds, buckets = histogram._sum, histogram._upper_bounds, histogram._buckets
    except AttributeError:  # not the prometheus_client this was written for: one at a time
        for value in values:
            histogram.observe(value)
        return
    total.inc(math.fsum(values))
    for value, n in collections.Counter(values).items():
        buckets[bisect.bisect_left(bounds, value)].inc(n)
