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
    """Keeps every record; delivers it at once, unless `hold` (then `deliver` does, later)."""

    def __init__(self, *, hold: bool = False, full: bool = False) -> None:
        self.sent: list[Sent] = []
        self.hold, self.full = hold, full
        self.pending: list[Any] = []

    def produce(
        self, topic: str, *, key: bytes, value: bytes, headers: Headers, on_delivery: Any
    ) -> None:
        if self.full:
            raise BufferError("Local: Queue full")
        self.sent.append((topic, key, value, headers))
        if self.hold:
            self.pending.append(on_delivery)
        else:
            on_delivery(None, None)

    def deliver(self, err: object = None) -> None:
        for on_delivery in self.pending:
            on_delivery(err, None)

    def poll(self, timeout: float) -> int:
        time.sleep(timeout)
        return 0


def target(ex: ExecutionRequested, **kw: bool) -> tuple[KafkaTopicCaller, Producer]:
    c = KafkaTopicCaller("127.0.0.1:9", "ns", 1, Codec())  # nothing listens: never connects
    producer = Producer(**kw)
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
    headers = [*headers_for(ex, fingerprint), ("kadence-guarantee", b"at-least-once")]
    before = (c.topic_for(ex), ex.key.encode(), Codec().encode(ex), headers)
    deadline = time.monotonic() + 5
    assert c.forward(ex, Stop(), deadline, raw).status is OutcomeStatus.succeeded
    assert c(ex, Stop(), deadline).status is OutcomeStatus.succeeded
    started = c.start(ex, Stop(), raw)
    assert started is not None
    assert started.result(5).status is OutcomeStatus.succeeded
    assert producer.sent == [before, before, before]
    c._closed.set()


def test_bytes_in_another_schema_are_encoded_in_the_current_one() -> None:
    ex, raw = as_read()
    c, producer = target(ex)
    older = b"\xc3\x01" + bytes(8) + raw[10:]  # another writer schema's fingerprint
    assert c.forward(ex, Stop(), time.monotonic() + 5, older).status is OutcomeStatus.succeeded
    [(_, _, value, _)] = producer.sent
    assert value == raw
    c._closed.set()


def test_a_started_run_ends_with_its_delivery() -> None:
    ex, raw = as_read()
    c, producer = target(ex, hold=True)
    ok, failing = c.start(ex, Stop(), raw), c.start(ex, Stop(), None)
    assert ok is not None and failing is not None
    assert not ok.done()  # no thread waits: the delivery callback settles it
    producer.pending.pop(0)(None, None)
    producer.deliver("Broker: Not enough in-sync replicas")
    assert ok.result(0).status is OutcomeStatus.succeeded
    result = failing.result(0)
    assert (result.status, result.retryable) == (OutcomeStatus.failed, True)
    assert result.error is not None and "in-sync replicas" in result.error.message
    c._closed.set()


@pytest.mark.parametrize(
    ("reason", "retryable"),
    [
        (OutcomeStatus.cancelled, False),
        (OutcomeStatus.timed_out, True),
        (OutcomeStatus.lease_lost, False),
    ],
)
def test_a_started_run_ends_when_stopped_and_a_late_delivery_changes_nothing(
    reason: OutcomeStatus, retryable: bool
) -> None:
    ex, raw = as_read()
    c, producer = target(ex, hold=True)
    stop = Stop()
    started = c.start(ex, stop, raw)
    assert started is not None
    stop.set(reason)
    producer.deliver()
    assert (started.result(0).status, started.result(0).retryable) == (reason, retryable)
    c._closed.set()


def test_a_run_starts_on_the_pool_while_its_topic_is_unknown_or_the_queue_full() -> None:
    ex, raw = as_read()
    c, _ = target(ex, full=True)
    assert c.start(ex, Stop(), raw) is None
    c._known.clear()
    c.producer = Producer()  # type: ignore[assignment]
    assert c.start(ex, Stop(), raw) is None


def test_it_says_it_can_start_without_a_thread_only_once_its_topic_is_known() -> None:
    ex, raw = as_read()
    c, _producer = target(ex)
    assert c.can_start(ex)
    c._known.clear()  # the topic not created yet: the blocking call creates it, on the pool
    assert not c.can_start(ex)
    assert c.start(ex, Stop(), raw) is None
    c._closed.set()
