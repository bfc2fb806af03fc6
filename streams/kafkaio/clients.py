"""Every Kafka client of a process, built in one place from its settings.

The shared options (`KadenceSettings.kafka_common()`: the cluster, and whatever security or
tuning a deployment adds there) reach every client, then the role's defaults, then the
caller's overrides for its own needs. Code that needs a client asks a `Clients`; tests hand
it an in-memory cluster that implements the same protocol.
"""

from __future__ import annotations

from typing import Any, Protocol

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from kadence.settings import KadenceSettings
from streams.kafkaio.ports import AdminLike, ConsumerLike, ProducerLike

TRANSACTION_TIMEOUT_MS = 10_000
"""The broker aborts a transaction left open this long (a crashed or stopped owner), which is
how soon a read_committed reader gets past it."""


class Clients(Protocol):
    """Makes the Kafka clients a process uses; overrides are librdkafka options."""

    def consumer(self, group_id: str, client_id: str, **overrides: Any) -> ConsumerLike:
        """A read_committed consumer that commits offsets only through transactions."""
        ...

    def transactional_producer(self, transactional_id: str, **overrides: Any) -> ProducerLike:
        """A producer for `TransactionalSession` (which initialises its transactions); a new
        one with the same id fences every older one."""
        ...

    def producer(self, client_id: str, **overrides: Any) -> ProducerLike:
        """An idempotent, non-transactional producer."""
        ...

    def admin(self) -> AdminLike: ...


class KafkaClients:
    """`Clients` for a real cluster, configured from `settings`."""

    def __init__(self, settings: KadenceSettings) -> None:
        self.settings = settings

    def consumer_config(self, group_id: str, client_id: str, **overrides: Any) -> dict[str, Any]:
        session_ms = self.settings.session_timeout_ms
        return {
            **self.settings.kafka_common(),
            "group.id": group_id,
            "client.id": client_id,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": max(500, session_ms // 5),
            **overrides,
        }

    def transactional_producer_config(
        self, transactional_id: str, **overrides: Any
    ) -> dict[str, Any]:
        return {
            **self.settings.kafka_common(),
            "client.id": transactional_id,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            **overrides,
        }

    def producer_config(self, client_id: str, **overrides: Any) -> dict[str, Any]:
        return {
            **self.settings.kafka_common(),
            "client.id": client_id,
            "enable.idempotence": True,
            **overrides,
        }

    def consumer(self, group_id: str, client_id: str, **overrides: Any) -> ConsumerLike:
        return Consumer(self.consumer_config(group_id, client_id, **overrides))

    def transactional_producer(self, transactional_id: str, **overrides: Any) -> ProducerLike:
        return Producer(self.transactional_producer_config(transactional_id, **overrides))

    def producer(self, client_id: str, **overrides: Any) -> ProducerLike:
        return Producer(self.producer_config(client_id, **overrides))

    def admin(self) -> AdminLike:
        return AdminClient(self.settings.kafka_common())
