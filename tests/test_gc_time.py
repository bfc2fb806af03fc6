"""`kadence_gc_seconds_total` and `kadence_gc_collections_total` count what the cyclic
collector did in the process (kadence/gc_time.py), on every served registry."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kadence import gc_time, metrics
from tests.served import PORT, without_a_server


def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels["generation"]): s.value
        for metric in registry.collect()
        for s in metric.samples
        if s.name.startswith("kadence_gc_")
    }


def test_each_collection_is_counted_with_the_cpu_it_took() -> None:
    gc_time.watch()
    gc_time.watch()  # once per process however often
    assert gc.callbacks.count(gc_time._hook) == 1
    registry = CollectorRegistry()
    registry.register(gc_time.GcTime())
    before = samples(registry)
    held = [[i] for i in range(200_000)]  # something for a full collection to walk
    for _ in range(3):
        gc.collect()
    after = samples(registry)
    assert (
        after[("kadence_gc_collections_total", "2")]
        >= before[("kadence_gc_collections_total", "2")] + 3
    )
    assert after[("kadence_gc_seconds_total", "2")] > before[("kadence_gc_seconds_total", "2")]
    assert set(after) == {
        (name, str(g))
        for name in ("kadence_gc_seconds_total", "kadence_gc_collections_total")
        for g in range(3)
    }
    assert len(held) == 200_000


def test_a_served_registry_has_them(monkeypatch: pytest.MonkeyPatch) -> None:
    without_a_server(monkeypatch)
    registry = CollectorRegistry()
    assert b"kadence_gc_" not in generate_latest(registry)
    assert metrics.serve(PORT, registry) == PORT
    text = generate_latest(registry).decode()
    assert 'kadence_gc_seconds_total{generation="2"}' in text
    assert 'kadence_gc_collections_total{generation="0"}' in text
