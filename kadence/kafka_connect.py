"""Reaching the cluster at start-up: a connection the cluster refuses (a wrong password, a
certificate it does not trust) is a clear error at once, not a wait that ends in "transport
failure". librdkafka reports such failures only through its error callback, so the clients that
look the cluster up first (provisioning, the SDK) collect them here."""

from __future__ import annotations

import time
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin._metadata import ClusterMetadata

from kadence.errors import TopicError
from kadence.settings import KadenceSettings

REFUSALS = {KafkaError._AUTHENTICATION, KafkaError._SSL}
"""librdkafka errors that retrying cannot fix: the credentials or the certificates."""


class Lister(Protocol):
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata: ...

    def poll(self, timeout: float = -1) -> int: ...


class ErrorLog:
    """A librdkafka `error_cb` that keeps the errors a client reports."""

    def __init__(self) -> None:
        self.errors: list[KafkaError] = []

    def __call__(self, error: KafkaError) -> None:
        self.errors.append(error)

    def refusal(self) -> KafkaError | None:
        return next((e for e in reversed(self.errors) if e.code() in REFUSALS), None)


def metadata(
    client: Lister,
    errors: ErrorLog,
    settings: KadenceSettings,
    timeout_s: float,
    topic: str | None = None,
) -> ClusterMetadata:
    """The cluster's metadata, asked in short steps so that a refused connection ends the wait
    at once with what to fix; otherwise as `list_topics`, up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        step = max(0.1, min(1.0, deadline - time.monotonic()))
        try:
            return client.list_topics(topic, timeout=step)
        except KafkaException as exc:
            client.poll(0)  # serves the error callback: what went wrong, if the broker said
            refused = errors.refusal()
            if refused is not None:
                raise TopicError(refusal_message(settings, refused)) from exc
            if time.monotonic() >= deadline:
                raise TopicError(
                    f"cannot reach Kafka at {settings.bootstrap_servers}: {exc}. Fix: start the "
                    "broker (`make broker`) or set KADENCE_BOOTSTRAP_SERVERS."
                ) from exc


def refusal_message(settings: KadenceSettings, error: KafkaError) -> str:
    what = (
        "the credentials (KADENCE_KAFKA_SASL_MECHANISM, _USERNAME, _PASSWORD)"
        if error.code() == KafkaError._AUTHENTICATION
        else "the certificates (KADENCE_KAFKA_SSL_CA_LOCATION, the client certificate and key) "
        "and KADENCE_KAFKA_SECURITY_PROTOCOL"
    )
    return (
        f"Kafka at {settings.bootstrap_servers} refused the connection "
        f"({settings.kafka_security_protocol}): {error.str()}. Fix: check {what}"
    )
