"""What Python's cyclic collector costs a process: `kadence_gc_seconds_total{generation}` and
`kadence_gc_collections_total{generation}`, CPU seconds and collections by generation, from
`gc.callbacks` (the CPU clock of whichever thread collects: the loop's, or the gc keeper's
sweep, apps/gc_keeper.py). Every served registry has them (kadence/metrics.py `serve`), and
`bench.sustained` prints them per execution as `collector`. A collection costs two clock
reads more (a system call each, well under a microsecond); collections come a few a second."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

GENERATIONS = 3
_seconds = [0.0] * GENERATIONS
_collections = [0] * GENERATIONS
_started = [0.0]


def _hook(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
        return
    generation = info["generation"]
    _seconds[generation] += time.thread_time() - _started[0]
    _collections[generation] += 1


def watch() -> None:
    """Count every collection from now on (once per process, however often it is called)."""
    if _hook not in gc.callbacks:
        gc.callbacks.append(_hook)


def seconds() -> list[float]:
    """CPU seconds spent collecting so far, by generation (a copy)."""
    return list(_seconds)


class GcTime(Collector):
    """The two counters, read at scrape time."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        spent = CounterMetricFamily(
            "kadence_gc_seconds",
            "CPU time of Python's cyclic collector in this process, by generation",
            labels=["generation"],
        )
        runs = CounterMetricFamily(
            "kadence_gc_collections",
            "Collections of Python's cyclic collector in this process, by generation",
            labels=["generation"],
        )
        for g in range(GENERATIONS):
            spent.add_metric([str(g)], _seconds[g])
            runs.add_metric([str(g)], _collections[g])
        yield spent
        yield runs
