"""The Kafka client objects Kadence uses, as the methods it calls on them.

confluent_kafka's `Consumer`, `Producer`, `AdminClient` and `Message` satisfy these protocols
as they are; an in-memory cluster for tests implements the same methods with the same names
and signatures. Only what Kadence calls is listed: a method added here must be added to every
implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, TopicPartition

HeaderValue = str | bytes | None
RecordHeaders = list[tuple[str, HeaderValue]]
"""Headers as Kadence produces them."""
ReadHeaders = dict[str, HeaderValue] | list[tuple[str, HeaderValue]]
"""Headers as a consumer may hand them back (librdkafka gives a list)."""
RebalanceCallback = Callable[[Any, list[TopicPartition]], None]
"""on_assign / on_revoke: (the consumer, the partitions)."""


class MessageLike(Protocol):
    """One record as consumed (or an error event in its place: `error()` is then set)."""

    def error(self) -> KafkaError | None: ...

    def topic(self) -> str | None: ...

    def partition(self) -> int | None: ...

    def offset(self) -> int | None: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def headers(self) -> ReadHeaders | None: ...

    def timestamp(self) -> tuple[int, int]:
        """(timestamp type, milliseconds); type 0 means the record has no timestamp."""
        ...


DeliveryCallback = Callable[[KafkaError | None, MessageLike], None]


class ConsumerLike(Protocol):
    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None: ...

    def assign(self, partitions: list[TopicPartition]) -> None: ...

    def assignment(self) -> list[TopicPartition]: ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> Sequence[MessageLike]: ...

    def committed(
        self, partitions: list[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]: ...

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]: ...

    def seek(self, partition: TopicPartition) -> None: ...

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching these partitions (a rebalance resumes the ones it assigns again)."""
        ...

    def resume(self, partitions: list[TopicPartition]) -> None: ...

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]: ...

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Cluster metadata: `.topics[name].partitions` (dict by id) and `.topics[name].error`."""
        ...

    def consumer_group_metadata(self) -> Any:
        """What `send_offsets_to_transaction` needs to fence a zombie (KIP-447)."""
        ...

    def close(self) -> None: ...


class ProducerLike(Protocol):
    def produce(
        self,
        topic: str,
        *,
        value: bytes | None = None,
        key: bytes | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        headers: RecordHeaders | None = None,
    ) -> None:
        """Queue a record (arguments by name: librdkafka's positions differ); BufferError
        when the local queue is full (poll, then try again)."""
        ...

    def poll(self, timeout: float = -1) -> int: ...

    def flush(self, timeout: float = -1) -> int: ...

    def init_transactions(self, timeout: float = -1) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(
        self, positions: list[TopicPartition], group_metadata: Any, timeout: float = -1
    ) -> None: ...

    def commit_transaction(self, timeout: float = -1) -> None: ...

    def abort_transaction(self, timeout: float = -1) -> None: ...


class AdminLike(Protocol):
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any: ...

    def create_topics(self, new_topics: list[Any], **kwargs: Any) -> dict[str, Any]:
        """Futures by topic name (`.result()` raises if the topic could not be created)."""
        ...
