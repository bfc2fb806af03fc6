"""The client SDK: put and delete schedule definitions and send commands, by producing to Kafka.

Everything is validated with the models before it is written, and each call returns only once
the broker has acknowledged the write (acks=all, idempotent producer), so "accepted" means
durable. Records go to the partition of the job's routing key (its `concurrency_key` group when
it has one), the same way every Kadence producer routes them.

    with KadenceClient(KadenceSettings()) as kadence:
        kadence.put(ScheduleDefinition(...))
        kadence.send(TriggerNow(...))
"""

from __future__ import annotations

import time
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from pydantic import ValidationError

from kadence.codec import Codec, describe_validation_error
from kadence.errors import (
    BulkInputError,
    BulkWriteError,
    DeliveryError,
    InvalidInputError,
    KadenceError,
    PayloadTooLargeError,
    TopicError,
)
from kadence.headers import TYPE, Headers, headers_for
from kadence.kafka_connect import ErrorLog, metadata
from kadence.models import (
    COMMAND_TYPES,
    Command,
    DeadLetter,
    ReplayDeadLetter,
    ScheduleDefinition,
    WireModel,
    job_key,
)
from kadence.models.connections import ConnectionRecord
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from kadence.timeengine.compile import compile_schedule
from kadence.topics import Topics


@dataclass(frozen=True)
class Written:
    """Where the broker stored a record."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Loaded:
    """What `put_stream` wrote: every definition acknowledged by the broker."""

    count: int
    seconds: float

    @property
    def per_s(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float(self.count)


STREAM_CHUNK = 10_000
"""Definitions `put_stream` has in flight at most before it waits for their acknowledgements."""


def routing_key(tenant: str, job_id: str, concurrency_key: str | None) -> str:
    """The key that picks a job's partition; mirrors `ScheduleDefinition.routing_key`."""
    return f"{tenant}/~{concurrency_key}" if concurrency_key else job_key(tenant, job_id)


class KadenceClient:
    """Writes definitions and commands. Thread-safe for producing; one per process is plenty."""

    def __init__(self, settings: KadenceSettings, codec: Codec | None = None) -> None:
        self.settings = settings
        self.topics = Topics(settings)
        self.codec = codec or Codec()
        self._errors = ErrorLog()
        self._producer = Producer(
            {
                **settings.kafka_common(),
                "error_cb": self._errors,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": int(settings.delivery_timeout_s * 1000),
            }
        )
        self._partitions: dict[str, int] = {}

    # -- the public calls -------------------------------------------------------------------

    def put(self, definition: ScheduleDefinition | Mapping[str, Any]) -> Written:
        """Create or update a job (a new version of its definition)."""
        return self.put_many([definition])[0]

    def put_many(
        self, definitions: Iterable[ScheduleDefinition | Mapping[str, Any]]
    ) -> list[Written]:
        """Write many definitions and wait once for all acknowledgements (bulk loads)."""
        pending = []
        for item in definitions:
            definition = self._validated(item)
            self._check_payload(definition.payload)
            pending.append(
                self._produce(
                    self.topics.schedules, definition.key, definition.routing_key, definition
                )
            )
        return self._await(pending)

    def put_stream(
        self,
        definitions: Iterable[ScheduleDefinition | Mapping[str, Any]],
        *,
        progress: Callable[[int], None] | None = None,
        chunk: int = STREAM_CHUNK,
    ) -> Loaded:
        """Write definitions as they come (a generator of millions is fine): each validated
        as `put` does, at most `chunk` in flight; after each chunk is acknowledged,
        `progress(written so far)`. An invalid item (or one the iterable fails to produce
        with an `InvalidInputError`) stops the load with a `BulkInputError` saying which and
        how many before it were written; nothing after it is."""
        if chunk < 1:
            raise ValueError("chunk must be >= 1")
        started = time.monotonic()
        pending: list[list[Message | KafkaError | None]] = []
        written, index = 0, 0
        items = iter(definitions)
        while True:
            try:
                item = next(items)
            except StopIteration:
                break
            except InvalidInputError as exc:
                self._stopped(exc, index, written + self._acked(pending, written))
            try:
                definition = self._validated(item)
                self._check_payload(definition.payload)
            except InvalidInputError as exc:
                self._stopped(exc, index, written + self._acked(pending, written))
            pending.append(
                self._produce(
                    self.topics.schedules, definition.key, definition.routing_key, definition
                )
            )
            index += 1
            if len(pending) >= chunk:
                written += self._acked(pending, written)
                pending = []
                if progress is not None:
                    progress(written)
        if pending:
            written += self._acked(pending, written)
            if progress is not None:
                progress(written)
        return Loaded(written, time.monotonic() - started)

    def _acked(self, pending: list[list[Message | KafkaError | None]], written: int) -> int:
        """How many of `pending` the broker acknowledged (all, or a BulkWriteError saying
        how many before them were)."""
        try:
            return len(self._await(pending))
        except DeliveryError as exc:
            raise BulkWriteError(
                f"{exc}; the first {written} were written", written=written
            ) from exc

    @staticmethod
    def _stopped(exc: InvalidInputError, index: int, written: int) -> typing.NoReturn:
        raise BulkInputError(
            f"item {index}: {exc}; the {written} before it were written, none after",
            exc.errors,
            index=index,
            written=written,
        ) from exc

    def delete(
        self,
        tenant: str,
        job_id: str,
        concurrency_key: str | None = None,
        *,
        home: int | None = None,
    ) -> Written:
        """Delete a job. Without `home`: a tombstone on every partition of schedules, which
        reaches it wherever it lives (returned: the one on `concurrency_key`'s partition).
        With the view's `home` (every definition of the job came from that partition; the API
        passes it): one tombstone there, as no other partition can hold a copy. A job whose
        concurrency key changed has no `home`: the partition it left drops its copy only on a
        `JobMoved`, which one that has deleted its copy does not answer (a quick move back and
        delete could leave a copy firing; docs/decisions/0003). A wrong `home` deletes nothing."""
        key = job_key(tenant, job_id)
        topic = self.topics.schedules
        count = self.partitions(topic)
        if home is not None:  # librdkafka refuses a partition the topic does not have
            return self._await([self._produce(topic, key, "", None, partition=home)])[0]
        home = partition_for(routing_key(tenant, job_id, concurrency_key), count)
        slots = [self._produce(topic, key, "", None, partition=p) for p in range(count)]
        return self._await(slots)[home]

    def send(self, command: Command, concurrency_key: str | None = None) -> Written:
        """Send a command (trigger now, backfill, cancel, pause, resume) to the job's scheduler."""
        if not isinstance(command, COMMAND_TYPES):
            raise InvalidInputError(
                f"{type(command).__name__} is not a command", ["command: unknown type"]
            )
        payload = getattr(command, "payload", None)
        if payload:
            self._check_payload(payload)
        # a replay carrying its dead letter is Kadence's own word (the API read the letter back
        # from the dead-letter topic): it goes where only Kadence may write
        carries_letter = isinstance(command, ReplayDeadLetter) and command.letter is not None
        slot = self._produce(
            self.topics.scheduler_control if carries_letter else self.topics.commands,
            command.key,
            routing_key(command.tenant, command.job_id, concurrency_key),
            command,
        )
        return self._await([slot])[0]

    def put_connection(self, key: str, record: ConnectionRecord | None) -> Written:
        """Write a tenant's connection, sealed (None: delete it), keyed `tenant/name`, to the
        connections topic's one partition. Only the API may (the topic's ACLs)."""
        slot = self._produce(self.topics.connections, key, key, record, partition=0)
        return self._await([slot])[0]

    def dead_letter(self, partition: int, offset: int) -> DeadLetter | None:
        """The dead letter the dead-letter topic holds at (`partition`, `offset`), read back
        with a consumer that joins no group; None when it is no longer there (retention) or
        is not a dead letter."""
        consumer = Consumer(
            {
                **self.settings.kafka_common(),
                "group.id": "kadence-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        try:
            topic = self.topics.dead_letter
            consumer.assign([TopicPartition(topic, partition, offset)])
            deadline = time.monotonic() + self.settings.delivery_timeout_s
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                value = msg.value()
                if msg.offset() != offset or value is None:
                    return None  # that offset is gone (compacted, aborted, or past retention)
                try:
                    return self.codec.decode_as(value, DeadLetter)
                except KadenceError:
                    return None
            return None
        finally:
            consumer.close()

    def close(self) -> None:
        self._producer.flush(self.settings.delivery_timeout_s)

    def __enter__(self) -> KadenceClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _validated(item: ScheduleDefinition | Mapping[str, Any]) -> ScheduleDefinition:
        """Model validation, then the time engine's: zone, cron, bounds, spread."""
        if isinstance(item, ScheduleDefinition):
            definition = item
        else:
            try:
                definition = ScheduleDefinition.model_validate(item)
            except ValidationError as exc:
                errors = describe_validation_error(exc)
                raise InvalidInputError(
                    "invalid ScheduleDefinition: " + "; ".join(errors), errors
                ) from exc
        compile_schedule(definition.schedule, definition.key)
        return definition

    def _check_payload(self, payload: bytes) -> None:
        limit = self.settings.max_payload_bytes
        if len(payload) > limit:
            raise PayloadTooLargeError(
                f"payload is {len(payload)} bytes; the limit is {limit}",
                [f"payload: {len(payload)} bytes is over the {limit}-byte limit"],
            )

    def partitions(self, topic: str) -> int:
        if topic not in self._partitions:
            meta = metadata(
                self._producer, self._errors, self.settings, self.settings.delivery_timeout_s, topic
            )
            info = meta.topics.get(topic)
            if info is None or info.error is not None or not info.partitions:
                raise TopicError(
                    f"topic {topic} does not exist. Fix: provision the namespace "
                    f"'{self.settings.namespace}' (`kadence topics` or `make run`)."
                )
            self._partitions[topic] = len(info.partitions)
        return self._partitions[topic]

    def _produce(
        self,
        topic: str,
        key: str,
        route: str,
        record: WireModel | None,
        *,
        partition: int | None = None,
    ) -> list[Message | KafkaError | None]:
        """Produce `record` (None: a tombstone) to the partition of `route`, or `partition`."""
        slot: list[Message | KafkaError | None] = [None]

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            slot[0] = err if err is not None else msg

        value = self.codec.encode(record) if record is not None else None
        headers: Headers = [(TYPE, b"tombstone")]
        if record is not None:
            headers = headers_for(record, self.codec.schema_fingerprint(type(record)))
        self._producer.produce(
            topic,
            key=key.encode(),
            value=value,
            partition=partition_for(route, self.partitions(topic))
            if partition is None
            else partition,
            headers=headers,
            on_delivery=on_delivery,
        )
        self._producer.poll(0)
        return slot

    def _below_end(self, topic: str, partition: int) -> int:
        """An offset at or after a write the broker stored without saying where: the idempotent
        producer retried a write the broker already had (a slow answer), and librdkafka reports
        that duplicate as delivered with no offset. It is in the log, so below the partition's
        end now: waiting for a reader to pass the end's last offset waits for it."""
        consumer = Consumer(
            {
                **self.settings.kafka_common(),
                "group.id": "kadence-position",
                "enable.auto.commit": False,
            }
        )
        try:
            tp = TopicPartition(topic, partition)
            _low, high = consumer.get_watermark_offsets(
                tp, timeout=self.settings.delivery_timeout_s
            )
            return max(0, high - 1)
        except KafkaException as exc:
            raise DeliveryError(f"stored, but its position is unknown: {exc}") from exc
        finally:
            consumer.close()

    def _await(self, slots: list[list[Message | KafkaError | None]]) -> list[Written]:
        remaining = self._producer.flush(self.settings.delivery_timeout_s)
        out = []
        for slot in slots:
            result = slot[0]
            if result is None:
                raise DeliveryError(
                    f"the broker did not acknowledge the write within "
                    f"{self.settings.delivery_timeout_s:.0f} s ({remaining} records pending). "
                    f"Is Kafka up at {self.settings.bootstrap_servers}?"
                )
            if isinstance(result, KafkaError):
                raise DeliveryError(f"write failed: {result.str()}")
            topic, partition, offset = result.topic(), result.partition(), result.offset()
            if topic is None or partition is None:
                raise DeliveryError("the broker acknowledged a write without its position")
            if offset is None:  # stored, but where is not said: see `_below_end`
                offset = self._below_end(topic, partition)
            out.append(Written(topic, partition, offset))
        return out
