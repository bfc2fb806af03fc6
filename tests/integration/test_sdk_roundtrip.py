"""The SDK against a real broker: what goes in comes back byte for byte, Avro and JSON alike."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from confluent_kafka import Producer

from kadence.client import KadenceClient, routing_key
from kadence.codec import Codec
from kadence.errors import (
    InvalidInputError,
    InvalidScheduleError,
    PayloadTooLargeError,
    TopicError,
)
from kadence.examples import schedule_definition
from kadence.headers import DUE_AT, EXECUTION_ID, SCHEMA, TENANT, TYPE, header_value
from kadence.models import (
    COMMAND_TYPES,
    CronSchedule,
    KafkaTarget,
    OnceSchedule,
    ScheduleDefinition,
    TriggerNow,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.topic_reader import read_topic

CODEC = Codec()
T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _definitions(n: int) -> list[ScheduleDefinition]:
    out = []
    for i in range(n):
        schedule = (
            CronSchedule(expression=f"{i % 60} 9 * * 1-5", timezone="Europe/London")
            if i % 2
            else OnceSchedule(run_at=T)
        )
        out.append(
            ScheduleDefinition(
                tenant=f"tenant-{i % 3}",
                job_id=f"job-{i}",
                version=1,
                schedule=schedule,
                target=KafkaTarget(topic="out"),
                payload=json.dumps({"i": i}).encode(),
                concurrency_key="group-a" if i % 5 == 0 else None,
            )
        )
    return out


def test_sdk_avro_round_trip_byte_for_byte(settings: KadenceSettings) -> None:
    defs = _definitions(20)
    with KadenceClient(settings) as client:
        written = client.put_many(defs)
    assert len(written) == 20

    msgs = read_topic(settings.bootstrap_servers, Topics(settings).schedules, expect=20)

    assert len(msgs) == 20
    by_key = {m.key(): m for m in msgs}
    for d in defs:
        msg = by_key[d.key.encode()]
        assert msg.value() == CODEC.encode(d)  # byte for byte
        assert CODEC.decode_as(msg.value(), ScheduleDefinition) == d
        assert msg.partition() == partition_for(d.routing_key, settings.partitions)
        assert header_value(msg.headers(), TYPE) == "ScheduleDefinition"
        assert header_value(msg.headers(), TENANT) == d.tenant
        assert (
            header_value(msg.headers(), SCHEMA)
            == CODEC.schema_fingerprint(ScheduleDefinition).hex()
        )
    # a tenant's jobs sharing a concurrency key share a partition
    grouped: dict[str, set[int]] = {}
    for d in defs:
        if d.concurrency_key:
            partition = by_key[d.key.encode()].partition()
            assert partition is not None
            grouped.setdefault(d.tenant, set()).add(partition)
    assert len(grouped) == 3
    assert all(len(parts) == 1 for parts in grouped.values())


def test_json_written_by_a_human_round_trips(settings: KadenceSettings) -> None:
    """What `kcat -P -K:` would send: plain JSON, read back unchanged and decodable."""
    topic = Topics(settings).schedules
    doc = {
        "tenant": "acme",
        "job_id": "from-kcat",
        "version": 1,
        "schedule": {"kind": "cron", "expression": "*/15 * * * *", "timezone": "Australia/Sydney"},
        "target": {"kind": "http", "url": "https://hooks.acme.example/x"},
        "payload": {"report": "weekly"},
    }
    raw = json.dumps(doc).encode()
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    producer.produce(topic, key=b"acme/from-kcat", value=raw)
    assert producer.flush(10) == 0

    [msg] = read_topic(settings.bootstrap_servers, topic, expect=1)

    assert msg.value() == raw
    record = CODEC.decode_as(msg.value(), ScheduleDefinition)
    assert record.schedule == CronSchedule(expression="*/15 * * * *", timezone="Australia/Sydney")
    assert record.payload == b'{"report":"weekly"}'


def test_commands_and_tombstones(settings: KadenceSettings) -> None:
    topics = Topics(settings)
    trigger = TriggerNow(tenant="acme", job_id="daily", request_id="req-9", issued_at=T)
    with KadenceClient(settings) as client:
        sent = client.send(trigger, concurrency_key="ledger")
        deleted = client.delete("acme", "daily", concurrency_key="ledger")

    expected_partition = partition_for(routing_key("acme", "daily", "ledger"), settings.partitions)
    assert sent.partition == expected_partition
    assert deleted.partition == expected_partition
    [cmd] = read_topic(settings.bootstrap_servers, topics.commands, expect=1)
    assert CODEC.decode(cmd.value(), COMMAND_TYPES) == trigger
    # the delete reaches every partition: the job is found whatever its key is now
    tombs = read_topic(settings.bootstrap_servers, topics.schedules, expect=settings.partitions)
    assert sorted(t.partition() or 0 for t in tombs) == list(range(settings.partitions))
    assert {(t.key(), t.value()) for t in tombs} == {(b"acme/daily", None)}


def test_execution_headers_are_readable(settings: KadenceSettings) -> None:
    from kadence.examples import execution_requested  # noqa: PLC0415
    from kadence.headers import headers_for  # noqa: PLC0415

    ex = execution_requested()
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    producer.produce(
        Topics(settings).executions,
        key=ex.tenant.encode(),
        value=CODEC.encode(ex),
        headers=headers_for(ex, CODEC.schema_fingerprint(type(ex))),
    )
    producer.flush(10)
    [msg] = read_topic(settings.bootstrap_servers, Topics(settings).executions, expect=1)
    assert header_value(msg.headers(), EXECUTION_ID) == ex.execution_id
    assert header_value(msg.headers(), DUE_AT) == "2026-03-29T00:30:17.000Z"


def test_oversized_payload_is_refused_before_anything_is_written(settings: KadenceSettings) -> None:
    small = settings.model_copy(update={"max_payload_bytes": 1024})
    big = schedule_definition().model_copy(update={"payload": b"x" * 2048})
    with KadenceClient(small) as client, pytest.raises(PayloadTooLargeError) as err:
        client.put(big)
    assert err.value.errors == ["payload: 2048 bytes is over the 1024-byte limit"]
    assert read_topic(settings.bootstrap_servers, Topics(settings).schedules, 1, timeout_s=2) == []


def test_bad_schedules_are_refused_before_anything_is_written(settings: KadenceSettings) -> None:
    bad = schedule_definition().model_copy(
        update={"schedule": CronSchedule(expression="0 0 30 2 *", timezone="Mars/Base")}
    )
    with KadenceClient(settings) as client, pytest.raises(InvalidScheduleError) as err:
        client.put(bad)
    assert [e.split(":")[0] for e in err.value.errors] == [
        "schedule.timezone",
        "schedule.expression",
    ]
    with KadenceClient(settings) as client, pytest.raises(InvalidInputError) as err2:
        client.put({"tenant": "acme", "job_id": "x", "version": 1})
    assert "schedule: Field required" in err2.value.errors
    assert read_topic(settings.bootstrap_servers, Topics(settings).schedules, 1, timeout_s=2) == []


def test_missing_topics_say_how_to_fix(kafka_bootstrap: str) -> None:
    s = KadenceSettings(bootstrap_servers=kafka_bootstrap, namespace="never-provisioned")
    with KadenceClient(s) as client, pytest.raises(TopicError, match="provision the namespace"):
        client.put(schedule_definition())


def test_librdkafka_murmur2_partitioner_agrees(settings: KadenceSettings) -> None:
    """A kcat/librdkafka user with partitioner=murmur2 lands keys where Kadence does."""
    topic = Topics(settings).commands
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers, "partitioner": "murmur2"})
    keys = [f"tenant-{i}/job-{i * 7}" for i in range(40)]
    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"{}")
    assert producer.flush(10) == 0
    msgs = read_topic(settings.bootstrap_servers, topic, expect=len(keys))
    assert {bytes(m.key() or b"").decode(): m.partition() for m in msgs} == {
        k: partition_for(k, settings.partitions) for k in keys
    }
