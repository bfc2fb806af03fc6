"""Prometheus plumbing shared by the processes: serving, bounded tenant labels, consumer lag."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Protocol

from confluent_kafka import KafkaException, TopicPartition
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kadence import __version__, gc_time

log = logging.getLogger(__name__)
ANY_PORT = -1
"""KADENCE_METRICS_PORT=-1: serve metrics on a port the system picks (tests, several processes
on one host); the log line says which."""
LATENESS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300)
FAILURE_KINDS = ("refused", "quarantined")
"""The `kind`s of the scheduler's and the reaper's failure counters."""
MAX_TENANT_LABELS = 100
"""Tenants beyond this many share the label `other`, so a flood of tenants cannot explode
the metric cardinality."""


def serve(port: int, registry: CollectorRegistry, host: str = "127.0.0.1") -> int | None:
    """Serve `registry` on http://<host>:<port>/metrics (no-op for port 0; ANY_PORT: one the
    system picks). Loopback unless the deployment says otherwise (KADENCE_METRICS_HOST): the
    metrics name tenants. Logs `metrics listening on <host>:<port>` with the port it got, the
    line a parent reads (apps.processes.ChildProcess.listening), and returns that port."""
    if not port:
        return None
    build_info(registry)
    gc_time.watch()
    registry.register(gc_time.GcTime())
    server, _thread = start_http_server(max(port, 0), addr=host, registry=registry)
    bound_host, bound = server.server_address[:2]
    log.info("metrics listening on %s:%d", bound_host, bound)
    return int(bound)


class BuildInfo(Collector):
    """`kadence_build_info{version="0.11.0"} 1`: which release a process runs, so a dashboard or
    an alert sees a fleet halfway through an upgrade (docs/operations.md#upgrading)."""

    def __init__(self, version: str = __version__) -> None:
        self.version = version

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(
            "kadence_build_info", "The Kadence release this process runs", labels=["version"]
        )
        info.add_metric([self.version], 1)
        yield info


def build_info(registry: CollectorRegistry) -> None:
    """Export `kadence_build_info` on `registry` (every served registry has it: `serve`)."""
    registry.register(BuildInfo())


class TenantLabels:
    """The label for a tenant: itself for the first MAX_TENANT_LABELS seen, then `other`."""

    def __init__(self, limit: int = MAX_TENANT_LABELS) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, tenant: str) -> str:
        if tenant in self._seen or len(self._seen) < self.limit:
            self._seen.add(tenant)
            return tenant
        return "other"


class Positions(Protocol):
    """What the lag is read from: a consumer (confluent_kafka's, or a test's)."""

    def assignment(self) -> list[TopicPartition]: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]: ...


class LagTracker:
    """Consumer lag per topic, measured by the thread that owns the consumer (a librdkafka
    consumer's calls wait while another thread is inside consume(), so a scrape must not
    touch it), at most every `every_s`; collectors read the last measurement."""

    def __init__(self, group: str, every_s: float = 5.0) -> None:
        self.group = group
        self.every_s = every_s
        self.per_topic: dict[str, int] = {}
        self._last = 0.0

    def update(self, consumer: Positions) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        per_topic: dict[str, int] = {}
        try:
            assigned = consumer.assignment()
            for tp in consumer.position(assigned) if assigned else []:
                _low, high = consumer.get_watermark_offsets(tp, cached=True)
                if high >= 0 and tp.offset >= 0:
                    per_topic[tp.topic] = per_topic.get(tp.topic, 0) + max(0, high - tp.offset)
        except (KafkaException, RuntimeError):
            return  # closed or between assignments: keep the last measurement
        self.per_topic = per_topic

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "kadence_consumer_lag_records", "Records not yet consumed", labels=["group", "topic"]
        )
        for topic, n in sorted(self.per_topic.items()):
            lag.add_metric([self.group, topic], n)
        yield lag


class LagCollector(Collector):
    def __init__(self, tracker: LagTracker) -> None:
        self.tracker = tracker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self.tracker.collect()
