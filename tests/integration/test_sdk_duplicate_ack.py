"""A write the broker stored without saying where (librdkafka reports an idempotent retry of a
write the broker already had as delivered with no offset; seen under load as "the broker
acknowledged a write without its position") is a success: its position is taken as the
partition's last offset, at or after the write, which is what a reader waiting for it needs."""

from __future__ import annotations

import pytest

from kadence.client import KadenceClient, Written
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from tests.test_cli_put import job

pytestmark = [pytest.mark.kafka]


class StoredNowhere:
    """A delivery report with no offset, as librdkafka gives for a duplicate."""

    def __init__(self, topic: str, partition: int) -> None:
        self._topic, self._partition = topic, partition

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> None:
        return None


def test_a_write_stored_without_its_offset_is_placed_at_the_partition_end(
    settings: KadenceSettings,
) -> None:
    topic = Topics(settings).schedules
    with KadenceClient(settings) as client:
        written = [client.put(job(i)) for i in range(6)]
        partition = written[-1].partition
        last = max(w.offset for w in written if w.partition == partition)
        got = client._await([[StoredNowhere(topic, partition)]])  # type: ignore[list-item]
    assert got == [Written(topic, partition, last)]
