"""A Kafka client's librdkafka config, for clients outside the streams layer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KafkaOptions = Mapping[str, str | int | float | bool]


def kafka_config(common: str | KafkaOptions, role: KafkaOptions) -> dict[str, Any]:
    """A client's librdkafka config: the shared options (`KadenceSettings.kafka_common()`, or
    just a bootstrap address), then the role's own. For clients outside the streams layer."""
    base = {"bootstrap.servers": common} if isinstance(common, str) else dict(common)
    return {**base, **role}
