"""The query view's input loop: one record it cannot show, or a passing broker error at start,
freezes nothing; a loop that does end makes the view not ready (issue 14, items 3 and 4)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kadence.codec import Codec
from kadence.models import ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.views import apply
from streams.views.materializer import Materializer
from streams.views.query import ViewQueries
from streams.views.store import ViewStore, job_key

CODEC = Codec()


def binary_job(job_id: str = "bin") -> ScheduleDefinition:
    return ScheduleDefinition.model_validate(
        {
            "tenant": "acme",
            "job_id": job_id,
            "version": 1,
            "schedule": {"kind": "cron", "expression": "0 0 1 1 *"},
            "target": {"kind": "kafka", "topic": "out"},
            "payload": b"\xff\xfe\x00 not utf-8 \x80",
        }
    )


class FakeMessage:
    def __init__(self, topic: str, offset: int, key: bytes, value: bytes | None) -> None:
        self._topic, self._offset, self._key, self._value = topic, offset, key, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def materializer(tmp_path: Path) -> Materializer:
    return Materializer(KadenceSettings(partitions=1), ViewStore(tmp_path / "view"))


def test_a_binary_payload_is_shown_as_base64_and_reads_back_the_same(tmp_path: Path) -> None:
    m = materializer(tmp_path)
    d = binary_job()
    m._apply(FakeMessage(m.topics.schedules, 0, d.key.encode(), CODEC.encode(d)))  # type: ignore[arg-type]
    m.store.flush()
    assert (m.applied, m.failed) == (1, 0)
    doc = m.store.get(job_key("acme", "bin"))
    assert doc is not None
    assert doc["definition"]["payload_encoding"] == "base64"
    assert (
        ScheduleDefinition.model_validate(apply.definition_of(doc["definition"])).payload
        == d.payload
    )
    assert ViewQueries(m.store).job("acme", "bin", 0, 1) is not None


def test_a_record_that_cannot_be_applied_is_counted_and_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m = materializer(tmp_path)

    def broken(*_a: Any, **_k: Any) -> None:
        raise TypeError("a record the view has no code for")

    monkeypatch.setattr(apply, "apply_definition", broken)
    d = binary_job("first")
    m._apply(FakeMessage(m.topics.schedules, 41, d.key.encode(), CODEC.encode(d)))  # type: ignore[arg-type]
    assert (m.applied, m.failed) == (0, 1)
    assert m.store.offset(m.topics.schedules, 0) == 42  # the next record is read, not this again


class FlakyConsumer:
    """A consumer whose metadata calls meet a leader election `elections` times first."""

    def __init__(self, topics: Topics, elections: int, code: int) -> None:
        self.topics, self.left, self.code = topics, elections, code
        self.assigned: list[Any] = []
        self.closed = False

    def _maybe_fail(self) -> None:
        if self.left > 0:
            self.left -= 1
            raise KafkaException(KafkaError(self.code))

    def list_topics(self, topic: str, timeout: float) -> Any:
        self._maybe_fail()
        part = type("P", (), {})()
        info = type("T", (), {"partitions": {0: part}, "error": None})()
        return type("M", (), {"topics": {topic: info}})()

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        self._maybe_fail()
        return 0, 0

    def assign(self, assignment: list[Any]) -> None:
        self.assigned = assignment

    def assignment(self) -> list[Any]:
        return []  # what the lag is measured on (kadence/metrics.py): none here

    def consume(self, n: int, timeout: float) -> list[Any]:
        return []

    def close(self) -> None:
        self.closed = True


def test_a_leader_election_at_start_is_waited_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("streams.kafkaio.retry.PAUSE_S", 0.0)
    m = materializer(tmp_path)
    m.consumer.close()
    m.consumer = FlakyConsumer(m.topics, 3, KafkaError.NOT_LEADER_FOR_PARTITION)  # type: ignore[assignment]
    thread = threading.Thread(target=m.run)
    thread.start()
    deadline = 100
    while not m.caught_up and deadline:
        threading.Event().wait(0.05)
        deadline -= 1
    m.stop()
    thread.join(5)
    assert m.ready and m.stopped_by is None
    assert len(m.consumer.assigned) == 4  # type: ignore[attr-defined]


def test_an_input_loop_that_dies_makes_the_view_not_ready(tmp_path: Path) -> None:
    m = materializer(tmp_path)
    m.consumer.close()
    m.consumer = FlakyConsumer(m.topics, 1, KafkaError.TOPIC_AUTHORIZATION_FAILED)  # type: ignore[assignment]
    with pytest.raises(KafkaException):
        m.run()
    assert not m.ready
    assert m.stopped_by is not None and "TOPIC_AUTHORIZATION_FAILED" in m.stopped_by
    assert m.consumer.closed  # type: ignore[attr-defined]
