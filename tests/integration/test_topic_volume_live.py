"""bench/topic_volume.py against the broker: it counts what was committed, topic by topic, and
leaves out aborted transactions and their markers."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from bench.topic_volume import per_execution, volume
from kadence.settings import KadenceSettings
from kadence.topics import Topics


def test_committed_records_and_bytes_are_counted_and_aborted_ones_are_not(
    settings: KadenceSettings,
) -> None:
    topics = Topics(settings)
    producer = Producer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "transactional.id": f"volume-{uuid.uuid4().hex[:8]}",
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topics.history, key=b"acme/j", value=b"v" * 10, headers=[("h", b"x")])
        producer.produce(topics.outcomes, key=b"acme/j", value=bytes([i]) * 20)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topics.history, key=b"acme/j", value=b"aborted" * 100)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topics.history, key=b"acme/k", value=b"w" * 4)
    producer.commit_transaction(30)
    counts = volume(settings, timeout_s=60)
    history = topics.history[len(settings.namespace) + 1 :]
    outcomes = topics.outcomes[len(settings.namespace) + 1 :]
    assert counts[history] == (6, 5 * (6 + 10 + 2) + (6 + 4))
    assert counts[outcomes] == (5, 5 * (6 + 20))
    assert set(counts) == {history, outcomes}  # topics nothing was written to are left out
    per = per_execution(counts, 5)
    assert per["all"] == {"records": 2.2, "bytes": round((100 + 130) / 5)}
