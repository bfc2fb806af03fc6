"""Metrics every processor runtime process shares: consumer lag of its group and restore
progress, read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from streams.runtime.loop import Runner


class RuntimeCollector(Collector):
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self.runner.lag.collect()
        restoring = dict(self.runner.restoring)  # a copy: the loop thread changes it
        yield GaugeMetricFamily(
            "kadence_restore_partitions",
            "Partitions whose state is being restored from the changelog",
            value=len(restoring),
        )
        yield GaugeMetricFamily(
            "kadence_restore_remaining_records",
            "Changelog records still to replay before those partitions process input",
            value=sum(max(0, total - done) for done, total in restoring.values()),
        )
        yield GaugeMetricFamily(
            "kadence_restores_completed",
            "Partition restores this process has completed",
            value=len(self.runner.stats.restores),
        )
