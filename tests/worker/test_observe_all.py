"""A transaction's lateness values recorded at once (`observe_all`, streams/worker/metrics.py)
give the histogram each would give observed one by one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram

from kadence.metrics import LATENESS_BUCKETS
from streams.worker.metrics import WorkerMetrics, observe_all

values = st.lists(
    st.sampled_from([float(b) for b in LATENESS_BUCKETS])  # on a bound: that bucket
    | st.floats(0, 10_000, allow_nan=False)
    | st.integers(0, 3_000).map(lambda ms: ms / 1000),
    max_size=200,
)


def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("le", "")): s.value
        for metric in registry.collect()
        for s in metric.samples
        if not s.name.endswith("_created")
    }


@given(batches=st.lists(values, max_size=4))
def test_observed_at_once_as_one_by_one(batches: list[list[float]]) -> None:
    one, many = CollectorRegistry(), CollectorRegistry()
    by_one = Histogram("h", "h", ["tenant"], buckets=LATENESS_BUCKETS, registry=one)
    at_once = Histogram("h", "h", ["tenant"], buckets=LATENESS_BUCKETS, registry=many)
    child, at_once_child = by_one.labels("t"), at_once.labels("t")
    for batch in batches:
        for v in batch:
            child.observe(v)
        observe_all(at_once_child, batch)
    expected, got = samples(one), samples(many)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == (pytest.approx(value) if key[0] == "h_sum" else value), key


def test_another_histogram_is_observed_one_by_one() -> None:
    seen: list[float] = []

    class Plain:
        def observe(self, value: float) -> None:
            seen.append(value)

    observe_all(Plain(), [0.1, 0.1, 2.0])  # type: ignore[arg-type]
    assert seen == [0.1, 0.1, 2.0]


def test_delivered_counts_as_each_run_would_and_looks_its_children_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    by_run, batched = WorkerMetrics(), WorkerMetrics()
    turns = [("a", [0.1, 0.2], [0.3, 0.3]), ("b", [1.5], [2.0]), ("a", [0.0], [0.05])]
    for tenant, late, seen in turns:
        for lateness, visible in zip(late, seen, strict=True):
            by_run.started(tenant, lateness)
            by_run.finished(tenant, "succeeded")
            by_run.visible(tenant, visible)
        batched.delivered(tenant, late, seen)
    assert samples(batched.registry) == pytest.approx(samples(by_run.registry))
    looked_up: list[tuple[str, ...]] = []
    real = Histogram.labels

    def labels(self: Histogram, *values: str) -> Histogram:
        looked_up.append(values)
        return real(self, *values)

    monkeypatch.setattr(Histogram, "labels", labels)
    batched.delivered("a", [0.4], [0.5])
    assert looked_up == []  # the children of a tenant seen before
