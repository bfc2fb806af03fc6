"""testkit.topic_reader.read_to_end: every committed record up to where the topic ended when
reading began, streamed, stopping there (a transaction's commit marker past the last record
included) instead of waiting out a timeout or stopping at a count (the chaos harness read a
10 M-job changelog with a cap of 10 M records and missed its own jobs' states)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.topic_reader import read_to_end

pytestmark = [pytest.mark.kafka]


def test_read_to_end_stops_at_the_end_it_saw_transaction_markers_and_all(
    settings: KadenceSettings,
) -> None:
    topic = Topics(settings).scheduler_changelog
    producer = Producer(
        {"bootstrap.servers": settings.bootstrap_servers, "transactional.id": uuid.uuid4().hex}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(1_500):
        producer.produce(topic, b"v", f"k{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", b"gone", partition=0)
    producer.abort_transaction(30)
    _committed_visible(settings.bootstrap_servers, topic, 501)
    started = time.monotonic()
    keys = [m.key() or b"" for m in read_to_end(settings.bootstrap_servers, topic, timeout_s=30)]
    assert time.monotonic() - started < 10  # the end, not the timeout
    assert sorted(keys) == sorted(f"k{i}".encode() for i in range(1_500))
    with pytest.raises(TimeoutError):  # not reached in time: said, not cut short silently
        list(read_to_end(settings.bootstrap_servers, topic, timeout_s=0))


def _committed_visible(bootstrap: str, topic: str, offset: int) -> None:
    """Wait until a read_committed reader's end of each partition is past `offset`. The
    coordinator writes a transaction's commit markers after `commit_transaction` returns, so
    a read begun at once may see a partition end at 0 and rightly read none of it (seen in
    CI: only partition 0's records read)."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed"}
    )
    try:
        deadline = time.monotonic() + 30
        for p in range(3):
            tp = TopicPartition(topic, p)
            while reader.get_watermark_offsets(tp, timeout=10)[1] < offset:
                assert time.monotonic() < deadline, f"{topic}[{p}]: the commit never visible"
                time.sleep(0.05)
    finally:
        reader.close()
