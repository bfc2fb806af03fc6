"""`ready` reads what waits, or the first record to come, without holding it back until a
batch fills (librdkafka's `consume(n, timeout)` does: it returns once n came or the timeout
passed)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

import pytest
from confluent_kafka import KafkaError

from streams.kafkaio import reading


def ready(consumer: BatchingConsumer, limit: int, timeout: float) -> list[Any]:
    return list(reading.ready(consumer, limit, timeout))  # type: ignore[arg-type]


class BatchingConsumer:
    """`consume(n, timeout)` as librdkafka: n records, or whatever came by the timeout."""

    def __init__(self) -> None:
        self.waiting: deque[str] = deque()
        self.calls: list[tuple[int, float]] = []

    def arrive_after(self, delay: float, *records: str) -> None:
        def later() -> None:
            time.sleep(delay)
            self.waiting.extend(records)

        threading.Thread(target=later, daemon=True).start()

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        self.calls.append((num_messages, timeout))
        end = time.monotonic() + timeout
        while len(self.waiting) < num_messages and time.monotonic() < end:
            time.sleep(0.001)
        return [self.waiting.popleft() for _ in range(min(num_messages, len(self.waiting)))]


def test_records_waiting_are_taken_at_once_up_to_the_limit() -> None:
    c = BatchingConsumer()
    c.waiting.extend(["a", "b", "c"])
    start = time.monotonic()
    assert ready(c, 2, 5.0) == ["a", "b"]
    assert ready(c, 2, 5.0) == ["c"]
    assert time.monotonic() - start < 1.0  # no call waited its 5 s


def test_a_lone_record_is_returned_as_it_comes_not_at_the_timeout() -> None:
    c = BatchingConsumer()
    c.arrive_after(0.05, "x")
    start = time.monotonic()
    got = ready(c, 500, 3.0)
    took = time.monotonic() - start
    assert list(got) == ["x"]
    assert took < 1.5, took  # consume(500, 3.0) would have held it for 3 s


def test_nothing_comes_within_the_timeout() -> None:
    c = BatchingConsumer()
    start = time.monotonic()
    assert ready(c, 500, 0.05) == []
    assert 0.04 < time.monotonic() - start < 1.0
    assert ready(c, 500, 0) == []
    assert c.calls[-1] == (500, 0)  # a zero timeout never waits for a first record


class Message:
    """A consumed message that carries `err` (None: a record)."""

    def __init__(self, err: KafkaError | None) -> None:
        self.err = err

    def error(self) -> KafkaError | None:
        return self.err


def test_a_record_is_usable_the_end_of_a_partition_silently_not_another_error_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="streams.kafkaio.reading"):
        assert reading.usable(Message(None))  # type: ignore[arg-type]
        assert not reading.usable(Message(KafkaError(KafkaError._PARTITION_EOF)))  # type: ignore[arg-type]
        assert caplog.records == []
        assert not reading.usable(Message(KafkaError(KafkaError._TRANSPORT)))  # type: ignore[arg-type]
    [line] = caplog.records
    assert line.getMessage().startswith("consumer error: ")
