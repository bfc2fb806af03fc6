"""Metrics every processor runtime process shares: consumer lag of its group, restore progress,
standby copies and the loop's CPU by kind of work (kadence/work_cpu.py), read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from streams.runtime.loop import Runner


class RuntimeCollector(Collector):
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from self.runner.lag.collect()
        yield from self.runner.work.collect()
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
        standbys = self.runner.standbys
        lag = dict(standbys.lag) if standbys is not None else {}  # replaced whole by the loop
        yield GaugeMetricFamily(
            "kadence_standby_partitions",
            "Partitions this process keeps a warm copy of without owning them",
            value=len(standbys.copies) if standbys is not None else 0,
        )
        yield GaugeMetricFamily(
            "kadence_standby_lag_records",
            "Changelog records those copies are behind: what a take-over would still restore",
            value=sum(lag.values()),
        )
        yield GaugeMetricFamily(
            "kadence_restores_completed",
            "Partition restores this process has completed",
            value=len(self.runner.stats.restores),
        )
