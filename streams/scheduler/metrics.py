"""Prometheus metrics of a scheduler process, read from its tasks at scrape time."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kadence.clock import datetime_to_ms
from kadence.metrics import FAILURE_KINDS, LATENESS_BUCKETS, TenantLabels
from kadence.models import DeadLetter, Decision, ExecutionRequested, HistoryRecord

CHILDREN_CACHED = 20_000
"""(tenant, trigger) pairs whose series `observe` keeps at hand; others are looked up each time."""
NOT_RUN = frozenset(
    {
        Decision.missed,
        Decision.coalesced,
        Decision.skipped_overlap,
        Decision.skipped_paused,
        Decision.skipped_dst,
        Decision.circuit_open,
        Decision.throttled,
    }
)


class SchedulerMetrics:
    """What the scheduler decides, observed as it writes: dispatch lateness per tenant and
    occurrences that did not run (missed windows, skips), by decision."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.tenant = TenantLabels()
        self._children: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
        self.dispatch_lateness = Histogram(
            "kadence_scheduler_dispatch_lateness_seconds",
            "When an execution became visible on the executions topic minus its due time "
            "(0 when it went out ahead, by the look-ahead)",
            ["tenant"],
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self.dispatched = Counter(
            "kadence_scheduler_executions_dispatched",
            "Executions written to the executions topic, by trigger",
            ["tenant", "trigger"],
            registry=self.registry,
        )
        self.deferred = Counter(
            "kadence_scheduler_outcomes_deferred",
            "Outcomes applied whose job's state was left to its next write (write_behind_ms)",
            registry=self.registry,
        )
        self.replayed = Counter(
            "kadence_scheduler_outcomes_replayed",
            "Deferred outcomes applied again after a restore, an abort or a rebalance",
            registry=self.registry,
        )
        self.failures = Counter(
            "kadence_scheduler_failures",
            "Inputs refused after an unexpected error (refused) and jobs taken out of the due "
            "index after one while firing or maintaining them (quarantined)",
            ["kind"],
            registry=self.registry,
        )
        for kind in FAILURE_KINDS:  # at 0 from the start: the alerts see the first one
            self.failures.labels(kind)
        self.dead_letters = Counter(
            "kadence_scheduler_dead_letters",
            "Executions dead-lettered (retries used up, or given up on by the reaper), by tenant",
            ["tenant"],
            registry=self.registry,
        )
        self.circuit_changes = Counter(
            "kadence_scheduler_tenant_circuit_changes",
            "A tenant's retry circuit opened or closed (counted by the partition that changed it)",
            ["tenant", "change"],
            registry=self.registry,
        )
        self.not_run = Counter(
            "kadence_scheduler_occurrences_not_run",
            "Occurrences that did not run, by decision (missed windows, skips, open circuits), "
            "and jobs that began to wait for their tenant's caps (throttled: they run later)",
            ["tenant", "decision"],
            registry=self.registry,
        )

    def observe(self, record: object) -> None:
        if isinstance(record, ExecutionRequested):
            lateness, dispatched, ahead = self._dispatch_children(
                record.tenant, record.trigger.value
            )
            if record.dispatched_at > record.due_at:
                late_ms = datetime_to_ms(record.dispatched_at) - datetime_to_ms(record.due_at)
                lateness.observe(late_ms / 1000)
                dispatched.inc()
            elif ahead is not None:  # dispatched ahead (most runs): what observe(0), inc() add
                for value in ahead:
                    value.inc(1)
            else:
                lateness.observe(0)
                dispatched.inc()
        elif isinstance(record, HistoryRecord) and record.decision in NOT_RUN:
            self.not_run.labels(self.tenant(record.tenant), record.decision.value).inc()
        elif isinstance(record, DeadLetter):
            self.dead_letters.labels(self.tenant(record.execution.tenant)).inc()

    def observe_all(
        self, records: Iterable[object], ahead: dict[tuple[str, str], int] | None = None
    ) -> None:
        """`observe` each of `records`; the runs dispatched ahead (most of a wake's: a job's
        runs of a look-ahead, one tenant and trigger) are added up first and counted once per
        tenant and trigger, not three additions per run. `ahead`: runs dispatched ahead
        counted already by (tenant, trigger), whose records were not made (a series' runs
        written from its template); added to."""
        ahead = {} if ahead is None else ahead
        for record in records:
            if isinstance(record, ExecutionRequested) and record.dispatched_at <= record.due_at:
                at = (record.tenant, record.trigger.value)
                ahead[at] = ahead.get(at, 0) + 1
            else:
                self.observe(record)
        for (tenant, trigger), n in ahead.items():
            lateness, dispatched, values = self._dispatch_children(tenant, trigger)
            if values is not None:
                for value in values:
                    value.inc(n)
            else:
                for _ in range(n):
                    lateness.observe(0)
                dispatched.inc(n)

    def _dispatch_children(self, tenant: str, trigger: str) -> tuple[Any, Any, Any]:
        """The (lateness, dispatched) series of a tenant and trigger, looked up once (labels()
        costs more than the observation; tenants past the label limit share `other`'s), and
        the values a run dispatched ahead adds one to (`_ahead`)."""
        children = self._children.get((tenant, trigger))
        if children is None:
            label = self.tenant(tenant)
            lateness = self.dispatch_lateness.labels(label)
            dispatched = self.dispatched.labels(label, trigger)
            children = (lateness, dispatched, _ahead(lateness, dispatched))
            if len(self._children) < CHILDREN_CACHED:
                self._children[(tenant, trigger)] = children
        return children


def _ahead(lateness: Histogram, dispatched: Counter) -> tuple[Any, Any] | None:
    """The lateness bucket of 0 s and the dispatched count: `lateness.observe(0)` adds one to
    the first and 0 to the sum, `dispatched.inc()` one to the second, each through checks and
    a bucket search that cost more than the additions (at every run). None when the client
    library is not the one this was written for (the observations are made as usual)."""
    try:
        bucket = lateness._buckets[bisect.bisect_left(lateness._upper_bounds, 0)]
        return bucket, dispatched._value
    except (AttributeError, IndexError):
        return None


class SchedulerCollector(Collector):
    """Gauges read at scrape time: `dead_letters()` (dead letters of this process's jobs not
    replayed) and `partitions()` (job partitions owned), both safe to call from any thread."""

    def __init__(
        self, dead_letters: Callable[[], int], partitions: Callable[[], int], job_partitions: int
    ) -> None:
        self.dead_letters = dead_letters
        self.partitions = partitions
        self.job_partitions = job_partitions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "kadence_dead_letter_depth",
            "Dead letters of this process's jobs that were not replayed",
            value=self.dead_letters(),
        )
        yield GaugeMetricFamily(
            "kadence_scheduler_partitions",
            "Job partitions this process owns",
            value=self.partitions(),
        )
        yield GaugeMetricFamily(
            "kadence_job_partitions",
            "Job partitions there are (KADENCE_PARTITIONS): the schedulers should own them all",
            value=self.job_partitions,
        )
