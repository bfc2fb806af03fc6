"""A query view restarted on its store (a persistent volume, infra/k8s/api.yaml) resumes from
the offsets stored with it on the real broker: it reads only what came after, so a restart
costs the records written while it was down, not the whole topics again; and it is ready once
it has read them, also where a transaction's commit marker, which it is never handed, ends
the partition."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kadence.client import KadenceClient
from kadence.codec import Codec
from kadence.headers import headers_for
from kadence.models import CronSchedule, KafkaTarget, ScheduleDefinition
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.kafkaio.clients import KafkaClients
from streams.views.materializer import Materializer
from streams.views.store import ViewStore

pytestmark = [pytest.mark.kafka]


def daily(i: int) -> ScheduleDefinition:
    return ScheduleDefinition(
        tenant="acme",
        job_id=f"job-{i}",
        version=1,
        schedule=CronSchedule(expression=f"{i % 60} 3 * * *", timezone="UTC"),
        target=KafkaTarget(topic="out"),
    )


def put_in_one_transaction(
    settings: KadenceSettings, definitions: list[ScheduleDefinition]
) -> None:
    """As the ingress writes them: one transaction, so its commit marker ends the partitions."""
    codec, topic = Codec(), Topics(settings).schedules
    producer = Producer(KafkaClients(settings).transactional_producer_config("view-resume-test"))
    producer.init_transactions(30)
    producer.begin_transaction()
    for d in definitions:
        producer.produce(
            topic,
            codec.encode(d),
            d.key.encode(),
            partition=partition_for(d.routing_key, settings.partitions),
            headers=headers_for(d, codec.schema_fingerprint(ScheduleDefinition)),
        )
    producer.commit_transaction(30)


def turn_until(view: Materializer, done: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "the view did not get there in time"
        view.turn(poll_s=0.1)


def started(settings: KadenceSettings, path: Path) -> Materializer:
    view = Materializer(settings, ViewStore(path))
    view.assign()
    return view


def stopped(view: Materializer) -> None:
    view.consumer.close()
    view.store.close()


def test_a_restarted_view_reads_only_what_came_after(
    settings: KadenceSettings, tmp_path: Path
) -> None:
    path = tmp_path / "view"
    with KadenceClient(settings) as client:
        client.put_many([daily(i) for i in range(30)])
    first = started(settings, path)
    try:
        turn_until(first, lambda: first.caught_up)
        assert first.applied == 30
    finally:
        stopped(first)

    again = started(settings, path)  # nothing new: caught up from its stored offsets at once
    try:
        assert again.caught_up
        again.turn(poll_s=0.5)
        assert again.applied == 0
    finally:
        stopped(again)

    # written while the view was down
    put_in_one_transaction(
        settings, [*map(daily, range(30, 35)), daily(0).model_copy(update={"version": 2})]
    )
    third = started(settings, path)
    try:
        assert not third.caught_up
        turn_until(third, lambda: third.caught_up)  # past the commit markers too
        assert third.applied == 6  # the five new jobs and the update, nothing read twice
        assert len(list(third.store.keys(b"J\0acme\0"))) == 35
        job0 = third.store.get(b"J\0acme\0job-0")
        assert job0 is not None
        assert job0["definition"]["version"] == 2
    finally:
        stopped(third)
