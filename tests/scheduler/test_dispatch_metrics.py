"""A run dispatched ahead is counted by adding one to its lateness bucket and to its tenant's
dispatched count directly (streams/scheduler/metrics.py): the series are the ones observing
and counting it through the client library would give."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from kadence.clock import ms_to_datetime
from kadence.metrics import LATENESS_BUCKETS
from kadence.models import ExecutionRequested, KafkaTarget, TriggerKind
from streams.scheduler import metrics as scheduler_metrics
from streams.scheduler.metrics import SchedulerMetrics

DUE_MS = 1_796_529_619_000


def execution(tenant: str, trigger: TriggerKind, late_ms: int) -> ExecutionRequested:
    """An execution dispatched `late_ms` after its due time (negative: ahead of it)."""
    due = ms_to_datetime(DUE_MS)
    return ExecutionRequested(
        execution_id=f"{tenant}/j@2026-12-01T08:00:00.000Z",
        tenant=tenant,
        job_id="j",
        definition_version=1,
        trigger=trigger,
        nominal_at=due,
        due_at=due,
        dispatched_at=due + timedelta(milliseconds=late_ms),
        target=KafkaTarget(topic="t"),
        timeout_ms=60_000,
        lease_ttl_ms=3_000,
    )


Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(registry: CollectorRegistry) -> Series:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for metric in registry.collect()
        for s in metric.samples
        if s.name.startswith(("kadence_scheduler_dispatch", "kadence_scheduler_executions"))
        and not s.name.endswith("_created")
    }


def by_the_library(records: list[ExecutionRequested]) -> Series:
    """Each record observed and counted one by one, as the client library does it."""
    registry = CollectorRegistry()
    lateness = Histogram(
        "kadence_scheduler_dispatch_lateness_seconds",
        "",
        ["tenant"],
        buckets=LATENESS_BUCKETS,
        registry=registry,
    )
    dispatched = Counter(
        "kadence_scheduler_executions_dispatched", "", ["tenant", "trigger"], registry=registry
    )
    for r in records:
        late_ms = max(0, (r.dispatched_at - r.due_at) // timedelta(milliseconds=1))
        lateness.labels(r.tenant).observe(late_ms / 1000)
        dispatched.labels(r.tenant, r.trigger.value).inc()
    return samples(registry)


runs = st.lists(
    st.tuples(
        st.sampled_from(["acme", "globex", "initech"]),
        st.sampled_from([TriggerKind.schedule, TriggerKind.manual, TriggerKind.retry]),
        st.sampled_from([-30_000, -1, 0, 1, 250, 1_000, 90_000]) | st.integers(-60_000, 600_000),
    ),
    max_size=60,
)


@given(runs)
def test_runs_dispatched_ahead_or_late_count_as_the_library_counts_them(
    spec: list[tuple[str, TriggerKind, int]],
) -> None:
    records = [execution(*one) for one in spec]
    expected = by_the_library(records)
    one_by_one, together = SchedulerMetrics(), SchedulerMetrics()
    for r in records:
        one_by_one.observe(r)
    together.observe_all(records)  # a wake's records, the ahead ones added up first
    for metrics in (one_by_one, together):
        assert all(ahead is not None for *_, ahead in metrics._children.values())  # direct
        got = samples(metrics.registry)
        assert got.keys() == expected.keys()
        for key, value in expected.items():
            assert got[key] == (pytest.approx(value) if key[0].endswith("_sum") else value), key


def test_another_client_library_is_observed_as_usual(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the internals `_ahead` adds to, a run dispatched ahead goes through observe and
    inc, with the same series."""
    monkeypatch.setattr(scheduler_metrics, "_ahead", lambda *_: None)
    records = [execution("acme", TriggerKind.schedule, ms) for ms in (-5_000, -1, 0, 2_000)]
    metrics, together = SchedulerMetrics(), SchedulerMetrics()
    for r in records:
        metrics.observe(r)
    together.observe_all(records)
    assert metrics._dispatch_children("acme", "schedule")[2] is None
    assert samples(metrics.registry) == by_the_library(records)
    assert samples(together.registry) == by_the_library(records)
