"""Reading executions back by (partition, offset): the Kafka reader (a plain consumer, on the
in-memory cluster here) and the driver's log reader agree, and neither fails on what is gone."""

from __future__ import annotations

import pytest

from streams.reaper.reader import ConsumerReader, ExecutionReader
from testkit.driver import Cluster, MemoryClients
from testkit.driver.faults import retriable_error
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


def test_what_retention_deleted_reads_as_none_and_what_is_not_there_yet_has_no_answer(
    cluster: Cluster,
) -> None:
    """Past the end is no answer (left out, asked again): a worker lists only offsets it read,
    and a partition's new leader may not show them for a moment."""
    cluster.log(TOPIC, 0).truncate_before(2)
    for reader in readers(cluster):
        found = reader.read([(0, 0), (0, 2), (0, 9), (1, 1)])
        assert found == {(0, 0): None, (0, 2): b"v4", (1, 1): b"v3"}


def test_a_partition_that_cannot_be_read_now_is_left_out_not_read_as_none(
    cluster: Cluster,
) -> None:
    """Its leader is down (a node kill): the reader cannot tell, and says so by leaving the refs
    out (None would mean gone for good, and the reaper would quarantine the run)."""
    clients = MemoryClients(cluster)
    reader = ConsumerReader(lambda: clients.consumer("drv.reaper.reader", "r0"), TOPIC, 0.5)
    cluster.faults.fail("get_watermark_offsets", retriable_error("injected: leader not available"))
    assert reader.read([(0, 2), (1, 0)]) == {(1, 0): b"v1"}
    assert reader.read([(0, 2), (1, 0)]) == {(0, 2): b"v4", (1, 0): b"v1"}
