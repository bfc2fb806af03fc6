"""The Kafka topic target sends the bytes the worker read, and they are the very record it used
to write by encoding the execution again (value, key and headers)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from connectors.kafka_topic import KafkaTopicCaller
from kadence.codec import Codec
from kadence.examples import examples
from kadence.headers import Headers, headers_for
from kadence.models import ExecutionRequested, KafkaTarget, OutcomeStatus
from kadence.targets import Stop

Sent = tuple[str, bytes, bytes, Headers]


class Producer:
    """Delivers every record at once, and keeps it."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    def produce(
        self, topic: str, *, key: bytes, value: bytes, headers: Headers, on_delivery: Any
    ) -> None:
        self.sent.append((topic, key, value, headers))
        on_delivery(None, None)

    def poll(self, timeout: float) -> int:
        time.sleep(timeout)
        return 0


def target(ex: ExecutionRequested) -> tuple[KafkaTopicCaller, Producer]:
    c = KafkaTopicCaller("127.0.0.1:9", "ns", 1, Codec())  # nothing listens: never connects
    producer = Producer()
    c.producer = producer  # type: ignore[assignment]
    c._known.add(c.topic_for(ex))
    return c, producer


def as_read(**changes: Any) -> tuple[ExecutionRequested, bytes]:
    """An execution as the worker gets it: the bytes the scheduler wrote, and their decoding."""
    example = examples()["ExecutionRequested"]
    assert isinstance(example, ExecutionRequested)
    written = example.model_copy(
        update={"tenant": "acme", "target": KafkaTarget(topic="out"), **changes}
    )
    raw = Codec().encode(written)
    ex = Codec().decode(raw)
    assert isinstance(ex, ExecutionRequested)
    return ex, raw


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"payload": b""},
        {"payload": bytes(range(256)) * 40, "content_type": "application/octet-stream"},
        {"attempt": 3, "delivery": 2, "headers": {"b": "2", "a": "1", "ü": "ß"}},
    ],
)
def test_forwarding_writes_the_record_encoding_would_have(changes: dict[str, Any]) -> None:
    ex, raw = as_read(**changes)
    c, producer = target(ex)
    fingerprint = Codec().schema_fingerprint(ExecutionRequested)
    before = (c.topic_for(ex), ex.key.encode(), Codec().encode(ex), headers_for(ex, fingerprint))
    deadline = time.monotonic() + 5
    assert c.forward(ex, Stop(), deadline, raw).status is OutcomeStatus.succeeded
    assert c(ex, Stop(), deadline).status is OutcomeStatus.succeeded
    assert producer.sent == [before, before]
    c._closed.set()


def test_bytes_in_another_schema_are_encoded_in_the_current_one() -> None:
    ex, raw = as_read()
    c, producer = target(ex)
    older = b"\xc3\x01" + bytes(8) + raw[10:]  # another writer schema's fingerprint
    assert c.forward(ex, Stop(), time.monotonic() + 5, older).status is OutcomeStatus.succeeded
    [(_, _, value, _)] = producer.sent
    assert value == raw
    c._closed.set()
