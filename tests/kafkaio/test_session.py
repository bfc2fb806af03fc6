"""The one transactional session: what each failure of a transaction ends as, and the clients'
configuration built from settings."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kadence.settings import KadenceSettings
from streams.kafkaio import errors
from streams.kafkaio.clients import KafkaClients
from streams.kafkaio.ports import AdminLike, ConsumerLike
from streams.kafkaio.session import Outcome, Timeouts, TransactionalSession


class Producer:
    """Records the transactional calls; `fail[call]` raises (or, for a callable, runs) once."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.produced: list[tuple[str, dict[str, Any]]] = []
        self.fail: dict[str, Any] = {}
        self.full = 0

    def _call(self, name: str) -> None:
        self.calls.append(name)
        failure = self.fail.pop(name, None)
        if isinstance(failure, BaseException):
            raise failure
        if failure is not None:
            failure()

    def produce(self, topic: str, **kwargs: Any) -> None:
        if self.full:
            self.full -= 1
            raise BufferError("queue full")
        self.produced.append((topic, kwargs))

    def poll(self, timeout: float = -1) -> int:
        self.calls.append("poll")
        return 0

    def flush(self, timeout: float = -1) -> int:
        self.calls.append("flush")
        return 0

    def init_transactions(self, timeout: float = -1) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None:
        self._call("offsets")

    def commit_transaction(self, timeout: float = -1) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float = -1) -> None:
        self._call("abort")


class Clients:
    def __init__(self) -> None:
        self.producers: list[Producer] = []
        self.ids: list[str] = []

    def consumer(self, group_id: str, client_id: str, **overrides: Any) -> ConsumerLike:
        raise NotImplementedError

    def transactional_producer(self, transactional_id: str, **overrides: Any) -> Producer:
        self.ids.append(transactional_id)
        self.producers.append(Producer())
        return self.producers[-1]

    def producer(self, client_id: str, **overrides: Any) -> Producer:
        raise NotImplementedError

    def admin(self) -> AdminLike:
        raise NotImplementedError


def kafka_error(**flags: bool) -> KafkaException:
    return KafkaException(KafkaError(KafkaError._STATE, "test", **flags))


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "RETRY_PAUSE_S", 0)


def opened(timeouts: Timeouts | None = None) -> tuple[Clients, TransactionalSession]:
    clients = Clients()
    session = TransactionalSession(clients, "app.1", timeouts=timeouts)
    session.begin()
    session.produce("out", 3, b"k", b"v", [("h", b"1")])
    return clients, session


OFFSETS = [TopicPartition("in", 0, 5)]


def test_a_commit_sends_the_offsets_with_the_group_metadata_then_commits() -> None:
    clients, session = opened()
    assert session.commit(OFFSETS, "group") is Outcome.committed
    assert clients.producers[0].calls == ["init", "begin", "offsets", "commit"]
    assert clients.producers[0].produced == [
        ("out", {"key": b"k", "value": b"v", "partition": 3, "headers": [("h", b"1")]})
    ]
    assert not session.open


def test_no_offsets_no_offsets_call() -> None:
    clients, session = opened()
    assert session.commit([], "group") is Outcome.committed
    assert "offsets" not in clients.producers[0].calls


def test_a_full_queue_is_waited_out_by_polling() -> None:
    clients, session = opened()
    producer = clients.producers[0]
    producer.full = 2
    session.produce("out", None, None, b"v", [])
    assert producer.calls.count("poll") == 2
    assert producer.produced[-1] == ("out", {"key": None, "value": b"v"})


def test_retriable_errors_are_retried_with_between_running_in_the_pauses() -> None:
    clients, session = opened()
    clients.producers[0].fail["commit"] = kafka_error(retriable=True)
    between: list[int] = []
    assert session.commit(OFFSETS, "g", between=lambda: between.append(1)) is Outcome.committed
    assert between == [1]
    assert clients.producers[0].calls[-2:] == ["commit", "commit"]


def test_an_error_that_requires_abort_aborts() -> None:
    clients, session = opened()
    clients.producers[0].fail["commit"] = kafka_error(txn_requires_abort=True)
    assert session.commit(OFFSETS, "g") is Outcome.aborted
    assert clients.producers[0].calls[-1] == "abort"
    assert len(clients.producers) == 1 and not session.open


def test_a_fatal_error_replaces_the_producer_under_the_same_id() -> None:
    clients, session = opened()
    clients.producers[0].fail["offsets"] = kafka_error(fatal=True)
    assert session.commit(OFFSETS, "g") is Outcome.replaced
    assert clients.ids == ["app.1", "app.1"]
    assert session.producer is clients.producers[1]
    assert clients.producers[1].calls == ["init"]
    assert session.replacements == 1 and not session.open


def test_offsets_still_failing_retriably_after_give_up_replace_the_producer() -> None:
    clients, session = opened(Timeouts(give_up_after_s=0.0))
    clients.producers[0].fail["offsets"] = kafka_error(retriable=True)
    assert session.commit(OFFSETS, "g") is Outcome.replaced
    assert len(clients.producers) == 2


def test_a_stuck_offsets_call_replaces_the_producer() -> None:
    clients, session = opened(Timeouts(hung_after_s=0.1))
    release = threading.Event()
    clients.producers[0].fail["offsets"] = lambda: release.wait(5)
    try:
        assert session.commit(OFFSETS, "g") is Outcome.replaced
    finally:
        release.set()
    assert len(clients.producers) == 2


def test_a_fatal_error_while_aborting_replaces_the_producer() -> None:
    clients, session = opened()
    clients.producers[0].fail["abort"] = kafka_error(fatal=True)
    assert session.abort() is Outcome.replaced
    assert len(clients.producers) == 2 and not session.open


def test_an_unknown_error_while_aborting_is_raised() -> None:
    clients, session = opened()
    clients.producers[0].fail["abort"] = kafka_error()
    with pytest.raises(KafkaException):
        session.abort()
    assert not session.open


def test_close_aborts_an_open_transaction_and_flushes() -> None:
    clients, session = opened()
    session.close()
    assert clients.producers[0].calls[-2:] == ["abort", "flush"]


def test_every_client_starts_from_the_settings_common_options() -> None:
    settings = KadenceSettings(bootstrap_servers="broker:1234", session_timeout_ms=6_000)
    clients = KafkaClients(settings)
    consumer = clients.consumer_config("g", "c", **{"auto.offset.reset": "latest"})
    assert consumer["bootstrap.servers"] == "broker:1234"
    assert (consumer["group.id"], consumer["client.id"]) == ("g", "c")
    assert consumer["isolation.level"] == "read_committed"
    assert consumer["enable.auto.commit"] is False
    assert consumer["auto.offset.reset"] == "latest"  # the override wins
    assert (consumer["session.timeout.ms"], consumer["heartbeat.interval.ms"]) == (6_000, 1_200)
    producer = clients.transactional_producer_config("app.1", **{"linger.ms": 5})
    assert producer["bootstrap.servers"] == "broker:1234"
    assert producer["transactional.id"] == producer["client.id"] == "app.1"
    assert producer["linger.ms"] == 5
    plain = clients.producer_config("sdk")
    assert plain["enable.idempotence"] is True and plain["bootstrap.servers"] == "broker:1234"
