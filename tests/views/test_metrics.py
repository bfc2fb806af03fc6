"""The query view's metrics without a broker (issue 43, item 4): records by what the view did
with them, caught up or not, the store's size (none once it is closed: a scrape while the
process stops does not fail) and the consumer lag its own loop measured."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import TopicPartition
from prometheus_client import CollectorRegistry

from kadence.codec import Codec
from kadence.models import ScheduleDefinition
from kadence.settings import KadenceSettings
from streams.views.materializer import Materializer
from streams.views.metrics import view_registry
from streams.views.store import ViewStore
from tests.hostile.test_view_input import FakeMessage

CODEC = Codec()


def job(job_id: str) -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "cron", "expression": "0 0 1 1 *"},
            "target": {"kind": "kafka", "topic": "out"},
        }
    )


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


class Positions:
    """A consumer 40 records behind on one partition of `schedules`."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(self.topic, 0)]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(self.topic, 0, 60)]

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return 0, 100


def test_the_view_counts_what_it_read_and_shows_its_store_and_lag(tmp_path: Path) -> None:
    m = Materializer(KadenceSettings(partitions=1), ViewStore(tmp_path / "view"))
    registry = view_registry(m)
    records = "kadence_view_records_total"
    assert value(registry, "kadence_view_caught_up") == 0
    before = value(registry, "kadence_view_store_keys")
    for i in range(3):
        d = job(f"j{i}")
        m._apply(FakeMessage(m.topics.schedules, i, d.key.encode(), CODEC.encode(d)))  # type: ignore[arg-type]
    m._apply(FakeMessage(m.topics.schedules, 3, b"acme/x", b"\x00garbage"))  # type: ignore[arg-type]
    m.store.flush()
    assert value(registry, records, result="applied") == 3
    assert value(registry, records, result="skipped") == 1
    assert value(registry, records, result="failed") == 0
    keys = value(registry, "kadence_view_store_keys")
    assert before is not None and keys is not None and keys >= before + 3  # 3 jobs, 1 offset
    size = value(registry, "kadence_view_store_bytes")
    assert size is not None and size > 0
    m.caught_up = True
    assert value(registry, "kadence_view_caught_up") == 1
    m.stopped_by = "KafkaException: gone"  # the input loop ended: not caught up any more
    assert value(registry, "kadence_view_caught_up") == 0
    m.lag.update(Positions(m.topics.schedules))
    lag = value(
        registry, "kadence_consumer_lag_records", group="kadence.views", topic=m.topics.schedules
    )
    assert lag == 40
    m.consumer.close()
    m.store.close()
    assert value(registry, "kadence_view_store_keys") is None  # closed: no size, no error
    assert value(registry, records, result="applied") == 3
