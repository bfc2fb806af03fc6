"""Prometheus metrics of the query view (served when KADENCE_METRICS_PORT is set): what it read
and did with each record, whether it has caught up, its consumer lag and its store's size. All
read at scrape time from the materializer (no lock: each is one int the input loop replaces)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from rocksdict import DbClosedError

from streams.views.materializer import Materializer

RESULTS = ("applied", "refused", "skipped", "failed")
STORE_PROPERTIES = {  # RocksDB's own estimates: cheap, read without scanning the store
    "keys": ("rocksdb.estimate-num-keys",),
    "bytes": ("rocksdb.total-sst-files-size", "rocksdb.cur-size-all-mem-tables"),
}


class ViewCollector(Collector):
    def __init__(self, materializer: Materializer) -> None:
        self.materializer = materializer

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        m = self.materializer
        records = CounterMetricFamily(
            "kadence_view_records",
            "Input records the query view read, by result: applied, refused (a definition the "
            "scheduler refuses too, left out), skipped (undecodable), failed (applying raised)",
            labels=["result"],
        )
        for result in RESULTS:
            records.add_metric([result], getattr(m, result))
        yield records
        yield GaugeMetricFamily(
            "kadence_view_caught_up",
            "1 once every input partition was read to its end as of the start and the input "
            "loop still runs (the API's /readyz), else 0",
            value=1 if m.ready else 0,
        )
        size = self.store_size()
        if size is not None:
            keys, size_bytes = size
            yield GaugeMetricFamily(
                "kadence_view_store_keys",
                "Keys in the view's store (RocksDB's estimate: jobs, history events, dead "
                "letters, offsets)",
                value=keys,
            )
            yield GaugeMetricFamily(
                "kadence_view_store_bytes",
                "The view's store on disk and in memory tables (RocksDB's figures)",
                value=size_bytes,
            )
        yield from m.lag.collect()

    def store_size(self) -> tuple[int, int] | None:
        """(keys, bytes) of the store, or None once it is closed (the process is stopping)."""
        db = self.materializer.store.db
        try:
            keys, size = (
                sum(db.property_int_value(p) or 0 for p in props)
                for props in STORE_PROPERTIES.values()
            )
        except DbClosedError:
            return None
        return keys, size


def view_registry(materializer: Materializer) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(ViewCollector(materializer))
    return registry
