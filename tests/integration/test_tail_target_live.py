"""`kadence tail --tenant T --target NAME --json` on a real broker (issue 43, item 7): a
tenant's own Kafka-target topic read as JSON lines, whatever each record holds (a worker's JSON
envelope, garbage another writer put there, a record too large to print); a topic not made yet
is a clear error."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from apps import cli
from apps.tail_target import MAX_SHOWN
from connectors.kafka_topic import KafkaTopicCaller
from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import DeliveryFormat, ExecutionRequested, KafkaTarget
from kadence.settings import KadenceSettings
from kadence.targets import Stop

pytestmark = [pytest.mark.kafka]


def test_tail_reads_the_tenants_target_topic_as_json(
    settings: KadenceSettings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = examples()["ExecutionRequested"]
    assert isinstance(ex, ExecutionRequested)
    ex = ex.model_copy(
        update={"target": KafkaTarget(topic="orders", format=DeliveryFormat.json), "payload": b"{}"}
    )
    caller = KafkaTopicCaller(settings.bootstrap_servers, settings.namespace, 1, Codec())
    try:
        assert caller(ex, Stop(), time.monotonic() + 30).status.value == "succeeded"
    finally:
        caller.close()
    topic = caller.topic_for(ex)
    hostile = Producer({"bootstrap.servers": settings.bootstrap_servers})
    hostile.produce(topic, key=b"\xff/x", value=b"\xc3\x01garbage", headers=[("k", b"\xff")])
    hostile.produce(topic, value=b"[" * (MAX_SHOWN + 10))
    assert hostile.flush(30) == 0
    monkeypatch.setenv("KADENCE_BOOTSTRAP_SERVERS", settings.bootstrap_servers)
    monkeypatch.setenv("KADENCE_NAMESPACE", settings.namespace)
    capsys.readouterr()
    argv = ["tail", "--tenant", "acme", "--target", "orders", "--from-beginning", "--json"]
    assert cli.main([*argv, "-n", "3", "--idle", "10"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["type"] for line in lines] == ["json", "undecodable", "too_large"]
    first = lines[0]
    assert (first["key"], first["value"]["execution_id"]) == (ex.key, ex.execution_id)
    assert first["headers"]["kadence-guarantee"] == "at-least-once"  # the claimed path's call
    assert lines[2]["bytes"] == MAX_SHOWN + 10
    assert cli.main(["tail", "--tenant", "acme", "--target", "never-made", "--idle", "1"]) == 2
    assert "no such topic" in capsys.readouterr().err
