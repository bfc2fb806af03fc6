"""An in-memory Kafka for tests: the cluster, and `MemoryClients` that build its clients.

`MemoryClients(cluster)` implements `streams.kafkaio.clients.Clients`, so the processor
runtime, the worker, restore and the views run on it unchanged. What it models, and where:
- partitions with offsets, watermarks, log start, compaction (log.py);
- transactions with producer epochs: a new producer of a transactional id fences the old one
  and aborts its open transaction; a transaction's records are invisible to read_committed
  readers until it commits and skipped once it aborts; offsets sent with it commit with it,
  refused when the group generation is stale (cluster.py, producer.py);
- consumer groups with generations and range assignment, rebalance callbacks served inside
  `consume()` (groups.py, consumer.py);
- faults: the next calls of a method fail with a given KafkaError, or hang (faults.py).
It never sleeps: `consume` returns what is there at once.
"""

from __future__ import annotations

from typing import Any

from testkit.driver.cluster import Cluster, Transaction
from testkit.driver.consumer import MemoryConsumer
from testkit.driver.faults import Faults, Hang, abort_error, fatal_error, retriable_error
from testkit.driver.groups import GroupMetadata
from testkit.driver.log import MemoryMessage
from testkit.driver.producer import MemoryAdmin, MemoryProducer

__all__ = [
    "Cluster",
    "Faults",
    "GroupMetadata",
    "Hang",
    "MemoryAdmin",
    "MemoryClients",
    "MemoryConsumer",
    "MemoryMessage",
    "MemoryProducer",
    "Transaction",
    "abort_error",
    "fatal_error",
    "retriable_error",
]


class MemoryClients:
    """`Clients` on an in-memory cluster, with the same role defaults as `KafkaClients`
    (read_committed consumers reading from the earliest offset, no auto-commit)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.consumers: list[MemoryConsumer] = []
        self.producers: list[MemoryProducer] = []
        """Every client built, in order (a test can reach the one a loop made)."""

    def consumer(self, group_id: str, client_id: str, **overrides: Any) -> MemoryConsumer:
        config = {
            "group.id": group_id,
            "client.id": client_id,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            **overrides,
        }
        consumer = MemoryConsumer(self.cluster, config)
        self.consumers.append(consumer)
        return consumer

    def transactional_producer(self, transactional_id: str, **overrides: Any) -> MemoryProducer:
        config = {"client.id": transactional_id, "transactional.id": transactional_id, **overrides}
        producer = MemoryProducer(self.cluster, config)
        self.producers.append(producer)
        return producer

    def producer(self, client_id: str, **overrides: Any) -> MemoryProducer:
        producer = MemoryProducer(self.cluster, {"client.id": client_id, **overrides})
        self.producers.append(producer)
        return producer

    def admin(self) -> MemoryAdmin:
        return MemoryAdmin(self.cluster)
