"""Transactional calls through an outage: retriable errors resume, a stuck call is abandoned."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from streams.kafkaio import errors


def failing(times: int, **flags: bool) -> tuple[list[int], Callable[[], None]]:
    calls: list[int] = []

    def call() -> None:
        calls.append(1)
        if len(calls) <= times:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "broker away", **flags))

    return calls, call


def test_a_retriable_error_is_retried_until_the_call_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0)
    calls, call = failing(3, retriable=True)
    between: list[int] = []
    errors.until_done(call, "committing", between=lambda: between.append(1))
    assert (len(calls), len(between)) == (4, 3)


def test_other_errors_are_raised_and_classified(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0)
    _calls, abortable = failing(1, txn_requires_abort=True)
    with pytest.raises(KafkaException) as info:
        errors.until_done(abortable, "committing")
    assert errors.requires_abort(info.value) and not errors.fatal(info.value)
    _calls, fenced = failing(1, fatal=True, retriable=True)
    with pytest.raises(KafkaException) as info:
        errors.until_done(fenced, "committing")
    assert errors.fatal(info.value)


def test_retrying_gives_up_after_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0.01)
    _calls, call = failing(10**9, retriable=True)
    with pytest.raises(KafkaException):
        errors.until_done(call, "sending offsets", give_up_after_s=0.05)


def test_a_call_that_never_returns_is_abandoned() -> None:
    release = threading.Event()

    def hang() -> None:
        release.wait(30)

    started = time.monotonic()
    with pytest.raises(errors.ProducerStuckError, match="did not return within"):
        errors.within(hang, 0.2, "sending offsets")
    assert time.monotonic() - started < 5
    release.set()
    with pytest.raises(ValueError, match="boom"):
        errors.within(lambda: (_ for _ in ()).throw(ValueError("boom")), 5, "x")
    errors.within(lambda: None, 5, "x")


def test_an_attempt_that_hangs_after_retriable_failures_is_abandoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The network-fault shape: a call times out retriably, and its retry never returns."""
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0)
    release = threading.Event()
    calls: list[int] = []

    def call() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "cut", retriable=True))
        release.wait(30)

    started = time.monotonic()
    with pytest.raises(errors.ProducerStuckError):
        errors.until_done(call, "sending offsets", give_up_after_s=60, attempt_timeout_s=0.2)
    assert len(calls) == 2
    assert time.monotonic() - started < 5  # the attempt limit, not give_up_after_s
    release.set()


def test_restore_waits_out_a_leader_election_not_flagged_retriable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fresh-clone CI saw get_watermark_offsets fail with NOT_LEADER_FOR_PARTITION, not
    flagged retriable, right after a changelog topic was created."""
    from confluent_kafka import TopicPartition  # noqa: PLC0415

    from streams.runtime import restore  # noqa: PLC0415

    monkeypatch.setattr("streams.runtime.restore.time.sleep", lambda _s: None)
    calls: list[int] = []

    class Consumer:
        def get_watermark_offsets(self, _tp: object, timeout: float) -> tuple[int, int]:
            calls.append(1)
            if len(calls) < 3:
                raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
            return 0, 7

    assert restore._watermarks(Consumer(), TopicPartition("t", 0)) == (0, 7)  # type: ignore[arg-type]
    assert len(calls) == 3

    class Broken:
        def get_watermark_offsets(self, _tp: object, timeout: float) -> tuple[int, int]:
            raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException):
        restore._watermarks(Broken(), TopicPartition("t", 0))  # type: ignore[arg-type]
