"""The Kafka topic target creates each tenant topic once, and different topics concurrently."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.cimpl import NewTopic

from connectors.kafka_topic import STOP_CHECK_S, KafkaTopicCaller
from kadence.codec import Codec
from kadence.examples import examples
from kadence.models import ExecutionRequested, KafkaTarget, OutcomeStatus
from kadence.replication import Replication
from kadence.targets import Stop


class SlowAdmin:
    """create_topics completes only once `parties` creations are in flight at the same time
    (a caller that creates topics one after another never gets there)."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=5)
        self.created: Counter[str] = Counter()
        self.replication: list[int] = []
        self.configs: list[dict[str, str]] = []
        self._lock = threading.Lock()

    def create_topics(self, topics: list[NewTopic]) -> dict[str, Future[None]]:
        out: dict[str, Future[None]] = {}
        for t in topics:
            with self._lock:
                self.created[t.topic] += 1
                self.replication.append(t.replication_factor)
                self.configs.append(dict(t.config or {}))
            self.barrier.wait()
            done: Future[None] = Future()
            done.set_result(None)
            out[t.topic] = done
        return out


def caller(admin: Any) -> KafkaTopicCaller:
    # nothing listens on port 9: the clients are built but never used
    asked: list[int] = []

    def replication() -> Replication:
        asked.append(1)
        return Replication(3, 2)

    c = KafkaTopicCaller("127.0.0.1:9", "ns", 3, Codec(), replication)
    c.asked = asked  # type: ignore[attr-defined]
    c.admin = admin
    return c


def test_first_uses_of_different_topics_create_them_concurrently() -> None:
    admin = SlowAdmin(parties=4)
    c = caller(admin)
    topics = [f"ns.to.tenant-{i}.out" for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(c._ensure, t) for t in topics]:
            f.result(10)  # a BrokenBarrierError here: the creations ran one at a time
    assert admin.created == Counter(topics)
    assert admin.replication == [3, 3, 3, 3]
    assert admin.configs == [{"min.insync.replicas": "2"}] * 4
    assert c.asked == [1]  # type: ignore[attr-defined]  # the cluster is asked once


def test_one_topic_is_created_once_however_many_runs_want_it() -> None:
    admin = SlowAdmin(parties=1)
    c = caller(admin)
    with ThreadPoolExecutor(8) as pool:
        for f in [pool.submit(c._ensure, "ns.to.t.out") for _ in range(32)]:
            f.result(10)
    assert admin.created == Counter({"ns.to.t.out": 1})


class ListingProducer:
    def __init__(self) -> None:
        self.listed: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.listed.append(topic)


def test_prepare_creates_the_topic_ahead_in_the_background() -> None:
    admin = SlowAdmin(parties=1)
    c = caller(admin)
    producer = ListingProducer()
    c.producer = producer  # type: ignore[assignment]
    example = examples()["ExecutionRequested"]
    assert isinstance(example, ExecutionRequested)
    ex = example.model_copy(update={"tenant": "acme", "target": KafkaTarget(topic="reports")})
    c.prepare(ex)
    c.prepare(ex)  # already under way: not twice
    deadline = time.monotonic() + 5
    while "ns.to.acme.reports" not in c._known and time.monotonic() < deadline:
        time.sleep(0.01)
    assert admin.created == Counter({"ns.to.acme.reports": 1})
    assert producer.listed == ["ns.to.acme.reports"]  # its metadata is known before the run
    c.prepare(ex)  # known: nothing more
    time.sleep(0.05)
    assert admin.created == Counter({"ns.to.acme.reports": 1})


def undeliverable() -> tuple[KafkaTopicCaller, ExecutionRequested]:
    """A caller whose broker is unreachable: a produce waits for a delivery that never comes."""
    c = KafkaTopicCaller("127.0.0.1:9", "ns", 1, Codec())
    example = examples()["ExecutionRequested"]
    assert isinstance(example, ExecutionRequested)
    ex = example.model_copy(update={"tenant": "acme", "target": KafkaTarget(topic="out")})
    c._known.add(c.topic_for(ex))  # no topic creation: straight to the produce
    return c, ex


def test_a_run_waiting_for_its_delivery_stops_when_told() -> None:
    c, ex = undeliverable()
    stop = Stop()
    threading.Timer(0.2, stop.set, args=(OutcomeStatus.cancelled,)).start()
    started = time.monotonic()
    result = c(ex, stop, time.monotonic() + 30)
    assert result.status is OutcomeStatus.cancelled
    assert time.monotonic() - started < 0.2 + 2 * STOP_CHECK_S + 0.5
    c._closed.set()


def test_a_run_waiting_for_its_delivery_times_out_at_its_deadline() -> None:
    c, ex = undeliverable()
    started = time.monotonic()
    result = c(ex, Stop(), time.monotonic() + 0.3)
    assert (result.status, result.retryable) == (OutcomeStatus.timed_out, True)
    assert 0.3 <= time.monotonic() - started < 0.3 + STOP_CHECK_S + 0.5
    pollers = [t for t in threading.enumerate() if t.name == "kafka-target-poller"]
    assert pollers  # deliveries are served by the caller's poller thread, not by each run
    c._closed.set()  # (close() would wait 10 s to flush what can never be delivered)


class FailingAdmin:
    """create_topics fails every time with `error` (an exception, raised by the future)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.tries = 0

    def create_topics(self, topics: list[NewTopic]) -> dict[str, Future[None]]:
        self.tries += 1
        failed: Future[None] = Future()
        failed.set_exception(self.error)
        return {t.topic: failed for t in topics}


def prepared_after(error: BaseException) -> tuple[KafkaTopicCaller, ExecutionRequested]:
    """A caller whose topic creation failed with `error`, once the background try ended."""
    admin = FailingAdmin(error)
    c = caller(admin)
    example = examples()["ExecutionRequested"]
    assert isinstance(example, ExecutionRequested)
    ex = example.model_copy(update={"tenant": "acme", "target": KafkaTarget(topic="out")})
    assert not c.unanswered(ex)  # never tried: nothing is waiting for the broker
    c.prepare(ex)
    deadline = time.monotonic() + 5
    while (admin.tries == 0 or c._preparing) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert admin.tries == 1 and not c._preparing
    assert c.topic_for(ex) not in c._known
    return c, ex


def test_a_topic_whose_creation_found_no_broker_is_unanswered() -> None:
    """A network outage: the run waits for the broker instead of being claimed."""
    for error in [
        TimeoutError(),
        KafkaException(KafkaError(KafkaError._TRANSPORT)),
        KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)),
    ]:
        c, ex = prepared_after(error)
        assert c.unanswered(ex), error


def test_a_topic_whose_creation_was_refused_is_not_unanswered() -> None:
    """A refusal is for the claimed path to report; waiting would not change it."""
    for error in [
        KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)),
        KafkaException(KafkaError(KafkaError.POLICY_VIOLATION)),
        ValueError("a bug"),
    ]:
        c, ex = prepared_after(error)
        assert not c.unanswered(ex), error


def test_a_topic_being_created_is_unanswered_until_it_is_known() -> None:
    admin = SlowAdmin(parties=2)  # the creation waits for a second one
    c = caller(admin)
    c.producer = ListingProducer()  # type: ignore[assignment]
    example = examples()["ExecutionRequested"]
    assert isinstance(example, ExecutionRequested)
    ex = example.model_copy(update={"tenant": "acme", "target": KafkaTarget(topic="out")})
    c.prepare(ex)
    assert c.unanswered(ex)  # under way
    with ThreadPoolExecutor(1) as pool:
        pool.submit(c._ensure, "ns.to.other.out").result(10)
    deadline = time.monotonic() + 5
    while c.topic_for(ex) not in c._known and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not c.unanswered(ex)
    assert c.delivery(ex, None) is not None
