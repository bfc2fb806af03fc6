"""Reading executions back by (partition, offset): the Kafka reader (a plain consumer, on the
in-memory cluster here) and the driver's log reader agree, and neither fails on what is gone."""

from __future__ import annotations

import pytest

from streams.reaper.reader import ConsumerReader, ExecutionReader
from testkit.driver import Cluster, MemoryClients
from testkit.driver.reader import LogReader

TOPIC = "drv.executions"


@pytest.fixture
def cluster() -> Cluster:
    c = Cluster()
    c.create_topic(TOPIC, 2)
    for i in range(6):
        c.append(None, TOPIC, i % 2, key=f"k{i}".encode(), value=f"v{i}".encode())
    return c


def readers(cluster: Cluster) -> list[ExecutionReader]:
    clients = MemoryClients(cluster)
    consumer = ConsumerReader(lambda: clients.consumer("drv.reaper.reader", "r0"), TOPIC, 0.5)
    return [consumer, LogReader(cluster, TOPIC)]


def test_each_ref_is_read_back_in_one_batch_per_partition(cluster: Cluster) -> None:
    for reader in readers(cluster):
        found = reader.read([(0, 2), (1, 0), (0, 0), (1, 2)])
        assert found == {(0, 2): b"v4", (1, 0): b"v1", (0, 0): b"v0", (1, 2): b"v5"}


def test_what_retention_deleted_or_was_never_written_reads_as_none(cluster: Cluster) -> None:
    cluster.log(TOPIC, 0).truncate_before(2)
    for reader in readers(cluster):
        found = reader.read([(0, 0), (0, 2), (0, 9), (1, 1)])
        assert found == {(0, 0): None, (0, 2): b"v4", (0, 9): None, (1, 1): b"v3"}
