"""The Kafka topic target: produce the execution to the tenant's own topic; success on ack.

A job names a topic; the worker writes to `<namespace>.to.<tenant>.<topic>`, so a tenant can
only ever reach topics under its own prefix (never Kadence's, never another tenant's). The
tenant part is escaped so that no two tenants' names meet, not even with `.` read as `_` (Kafka
refuses a name that collides so): kadence/target_topics.py. The record is the
ExecutionRequested (Avro, Kadence headers), keyed by the job key; consumers should deduplicate
on `execution_id` and check the tenant (see connectors.consumer). The worker hands over the
bytes it read from `executions` (`forward`): when they are in the current schema they are sent
as they are, which is what encoding the execution again would give, without its cost. What
the record holds in each delivery format, and its template: connectors/tenant_record.py.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from connectors.tenant_record import (
    AT_LEAST_ONCE,
    CONTENT_TYPE,
    EXACTLY_ONCE,
    TenantRecords,
    delivered,
    envelope_json,
)
from kadence.codec import MAGIC, Codec
from kadence.envelope import TOO_LARGE, TOO_LARGE_FIX
from kadence.errors import RecordTooLargeError
from kadence.headers import Headers
from kadence.kafka_options import KafkaOptions, kafka_config
from kadence.models import ExecutionRequested, KafkaTarget, OutcomeStatus
from kadence.replication import Replication
from kadence.target_topics import MAX_TOPIC_NAME
from kadence.targets import Delivery, Result, Stop
from kadence.topics import target_topic

log = logging.getLogger(__name__)
NAMES_CACHED = 100_000
STOP_CHECK_S = 0.1
"""How late a run waiting for its delivery may notice a stop (cancel, lease lost): at once, as
the stop wakes it."""
NO_ANSWER = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._MSG_TIMED_OUT,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
    }
)
"""Errors that say the broker did not answer, not that it refused."""

__all__ = [
    "AT_LEAST_ONCE",
    "CONTENT_TYPE",
    "EXACTLY_ONCE",
    "KafkaTopicCaller",
    "delivered",
    "envelope_json",
    "target_topic",
]


class KafkaTopicCaller:
    def __init__(
        self,
        kafka: str | KafkaOptions,
        namespace: str,
        partitions: int,
        codec: Codec,
        replication: Callable[[], Replication] = lambda: Replication(1, 1),
    ) -> None:
        self.namespace = namespace
        self.partitions = partitions
        self._replication = replication
        """Asked once, at the first topic this target creates (it may ask the cluster)."""
        self._resolved: Replication | None = None
        self.codec = codec
        self._fingerprint = codec.schema_fingerprint(ExecutionRequested)
        self._current = MAGIC + self._fingerprint
        """How a record in the current ExecutionRequested schema starts."""
        self._records = TenantRecords(self._fingerprint)
        self.admin = AdminClient(kafka_config(kafka, {}))
        self.producer = Producer(kafka_config(kafka, {"enable.idempotence": True, "linger.ms": 2}))
        self._known: set[str] = set()
        self._names: dict[tuple[str, str], str] = {}
        """(tenant, topic) -> its topic's name (escaping the tenant part costs per run)."""
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._preparing: set[str] = set()
        self._unanswered: set[str] = set()
        """Topics whose last preparation found no broker or timed out (not refused)."""
        self._poller: threading.Thread | None = None
        self._closed = threading.Event()
        self._background = ThreadPoolExecutor(4, thread_name_prefix="kafka-target-prepare")

    def topic_for(self, ex: ExecutionRequested) -> str:
        target = ex.target
        assert isinstance(target, KafkaTarget)
        pair = (ex.tenant, target.topic)
        name = self._names.get(pair)
        if name is None:
            if len(self._names) >= NAMES_CACHED:
                self._names.clear()
            name = self._names[pair] = target_topic(self.namespace, ex.tenant, target.topic)
        return name

    def prepare(self, ex: ExecutionRequested) -> None:
        """An execution was read ahead of its due time: create its topic and fetch its
        metadata in the background, so that at the due time the run only produces."""
        topic = self.topic_for(ex)
        if topic in self._known or topic in self._preparing:
            return
        with self._guard:
            if topic in self._preparing:
                return
            self._preparing.add(topic)
        self._background.submit(self._warm, topic)

    def _warm(self, topic: str) -> None:
        try:
            self._ensure(topic)
            self._unanswered.discard(topic)
            self.producer.list_topics(topic, timeout=10)
        except Exception as exc:  # the run itself will try again and report it
            log.info("could not prepare %s ahead of its runs: %s", topic, exc)
            if topic not in self._known and no_answer(exc):
                self._unanswered.add(topic)
            else:
                self._unanswered.discard(topic)
        finally:
            with self._guard:
                self._preparing.discard(topic)

    def _ensure(self, topic: str) -> None:
        """Create `topic` on its first use (one request; "already exists" is success). Each
        topic has its own lock: the first runs of fifty tenants create their fifty topics at
        once, not one after another while every other run waits."""
        if topic in self._known:
            return
        with self._guard:
            lock = self._locks.setdefault(topic, threading.Lock())
        with lock:
            if topic in self._known:
                return
            if self._resolved is None:
                self._resolved = self._replication()
            r = self._resolved
            futures = self.admin.create_topics(
                [NewTopic(topic, self.partitions, r.factor, config=r.config())]
            )
            try:
                futures[topic].result(10)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
            self._known.add(topic)

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        return self.forward(ex, stop, deadline, self.codec.encode(ex))

    def start(
        self, ex: ExecutionRequested, stop: Stop, record: bytes | None
    ) -> Future[Result] | None:
        """Produce and return: the delivery callback (on the poller thread) or a stop settles
        the run, no thread waits for it. None while its topic is not known to exist yet (the
        blocking call creates it) or the producer's queue is full."""
        topic = self.topic_for(ex)
        if topic not in self._known:
            return None
        if record is None or not record.startswith(self._current):
            record = self.codec.encode(ex)
        result: Future[Result] = Future()

        def settle(outcome: Result) -> None:
            with contextlib.suppress(InvalidStateError):  # the first of delivery and stop wins
                result.set_result(outcome)

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                settle(Result.ok())
            else:
                settle(Result.failed("KafkaError", f"{topic}: {err}", retryable=True))

        try:
            key, value, headers = self._record(topic, ex, record, AT_LEAST_ONCE)
        except RecordTooLargeError:
            return None  # the blocking call reports it
        try:
            self.producer.produce(
                topic, key=key, value=value, headers=headers, on_delivery=on_delivery
            )
        except BufferError:
            return None
        self._start_poller()
        stop.on_stop(lambda: settle(_stopped(stop)))
        return result

    def delivery(self, ex: ExecutionRequested, record: bytes | None) -> Delivery | None:
        """The tenant's record for `ex`, for the worker's own transaction (`Delivers`); None
        while its topic is not known to exist (preparing it), or when no record can go there."""
        topic = self.topic_for(ex)
        if topic not in self._known:
            self.prepare(ex)
            return None
        if record is None or not record.startswith(self._current):
            record = self.codec.encode(ex)
        return Delivery(topic, *self._record(topic, ex, record, EXACTLY_ONCE))

    def _record(
        self, topic: str, ex: ExecutionRequested, record: bytes, guarantee: tuple[str, bytes]
    ) -> tuple[bytes, bytes, Headers]:
        """Key, value and headers (`delivered`), or `RecordTooLargeError` when they would not
        fit the broker's limit (a JSON envelope of a payload the definition's check did not
        see: an older definition)."""
        return self._records.record(topic, ex, record, guarantee)

    def unanswered(self, ex: ExecutionRequested) -> bool:
        """Its topic is being created, or the last try found no broker or timed out."""
        topic = self.topic_for(ex)
        return topic not in self._known and (topic in self._preparing or topic in self._unanswered)

    def can_start(self, ex: ExecutionRequested) -> bool:
        """Its topic is known to exist (else the blocking call creates it first)."""
        return self.topic_for(ex) in self._known

    def forward(self, ex: ExecutionRequested, stop: Stop, deadline: float, record: bytes) -> Result:
        """Produce `record`, the bytes `ex` was read as, if they are in the current schema;
        else (an execution written before an upgrade) `ex` encoded now."""
        if not record.startswith(self._current):
            record = self.codec.encode(ex)
        topic = self.topic_for(ex)
        ready = self._ready(topic, ex, record)
        if isinstance(ready, Result):
            return ready
        key, value, headers = ready
        done, wake = threading.Event(), threading.Event()
        errors: list[KafkaError] = []

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)
            done.set()
            wake.set()

        self.producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            on_delivery=on_delivery,
        )
        self._start_poller()
        stop.on_stop(wake.set)
        wake.wait(max(0.0, deadline - time.monotonic()))  # the delivery or a stop wakes it
        if not done.is_set():
            if stop.is_set():
                return Result(stop.reason or OutcomeStatus.cancelled)
            return Result(OutcomeStatus.timed_out, True)
        if errors:
            return Result.failed("KafkaError", f"{topic}: {errors[0]}", retryable=True)
        return Result.ok()

    def _ready(
        self, topic: str, ex: ExecutionRequested, record: bytes
    ) -> tuple[bytes, bytes, Headers] | Result:
        """The record to produce, its topic created; or why the run fails without it."""
        if len(topic) > MAX_TOPIC_NAME:  # validation refuses such jobs; this is an old record
            return Result.failed(
                "TopicError",
                f"{topic}: longer than Kafka's {MAX_TOPIC_NAME} characters; shorten the topic",
                retryable=False,
            )
        try:
            key, value, headers = self._record(topic, ex, record, AT_LEAST_ONCE)
        except RecordTooLargeError as exc:  # no retry can make it fit: dead-lettered at once
            return Result.failed(TOO_LARGE, f"{exc}; {TOO_LARGE_FIX}", retryable=False)
        try:
            self._ensure(topic)
        except Exception as exc:
            return Result.failed("TopicError", f"{topic}: {exc}", retryable=True)
        return key, value, headers

    def _start_poller(self) -> None:
        """One thread serves every delivery callback (sixty-four runs each polling the
        producer every few milliseconds would spend the worker's CPU on waking up)."""
        if self._poller is not None:
            return
        with self._guard:
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll, name="kafka-target-poller", daemon=True
                )
                self._poller.start()

    def _poll(self) -> None:
        while not self._closed.is_set():
            self.producer.poll(0.05)

    def close(self) -> None:
        self._closed.set()
        self._background.shutdown(wait=False, cancel_futures=True)
        self.producer.flush(10)


def _stopped(stop: Stop) -> Result:
    """How a run the worker stopped ends: a timeout may be retried, like a missed deadline."""
    if stop.reason is OutcomeStatus.timed_out:
        return Result(OutcomeStatus.timed_out, True)
    return Result(stop.reason or OutcomeStatus.cancelled)


def no_answer(exc: BaseException) -> bool:
    """`exc` says the broker did not answer (a timeout, no connection), not that it refused."""
    if isinstance(exc, TimeoutError):
        return True
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return error.code() in NO_ANSWER or bool(error.retriable())
    return False
