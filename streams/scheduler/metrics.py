"""Prometheus metrics of a scheduler process, read from its tasks at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from streams.runtime.runner import Runner
from streams.scheduler.processor import SchedulerProcessor


class SchedulerCollector(Collector):
    def __init__(self, runner: Runner, processor: SchedulerProcessor) -> None:
        self.runner = runner
        self.processor = processor

    def collect(self) -> Iterator[GaugeMetricFamily]:
        tasks = list(self.runner.tasks.values())  # a copy: the loop thread may reassign
        depth = sum(self.processor.dead_letter_depth(t) for t in tasks)
        yield GaugeMetricFamily(
            "kadence_dead_letter_depth",
            "Dead letters of this process's jobs that were not replayed",
            value=depth,
        )
        yield GaugeMetricFamily(
            "kadence_scheduler_partitions", "Job partitions this process owns", value=len(tasks)
        )
