"""Passing broker errors (leader elections, restarts) are waited out; real ones are not."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.kafkaio.retry import passing, retrying


def _failing(codes: list[int], result: str = "ok") -> tuple[list[int], object]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(codes):
            raise KafkaException(KafkaError(codes[len(calls) - 1]))
        return result

    return calls, call


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_LEADER_FOR_PARTITION,  # what killed the view's input thread at start
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.OFFSET_NOT_AVAILABLE,  # a standby's watermark query, a leader just elected
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,  # a standby's watermark query as the broker came back
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    ],
)
def test_a_leader_election_or_restart_is_waited_out(code: int) -> None:
    calls, call = _failing([code, code])
    assert retrying(call, "test", sleep=lambda _s: None) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 3


def test_a_real_error_is_raised_at_once() -> None:
    calls, call = _failing([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        retrying(call, "test", sleep=lambda _s: None)  # type: ignore[arg-type]
    assert len(calls) == 1
    assert not passing(ValueError("not a Kafka error"))


def test_it_gives_up_after_its_deadline() -> None:
    calls, call = _failing([KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException):
        retrying(call, "test", give_up_after_s=0.0, sleep=lambda _s: None)  # type: ignore[arg-type]
    assert len(calls) <= 2  # past the deadline: no more attempts
