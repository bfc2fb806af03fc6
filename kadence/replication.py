"""How many copies Kadence keeps of its topics: the replication factor and
`min.insync.replicas` it creates them with, from the settings or from the cluster's size.

On a cluster of three or more brokers the default is 3 copies with 2 in sync (a write is
acknowledged by two, so one broker can die without losing it); on one broker, 1 and 1. An
internal topic with fewer copies than that on a multi-broker cluster is refused unless the
settings say so (`KADENCE_ALLOW_UNDER_REPLICATED`): losing one disk would lose schedules.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._metadata import TopicMetadata

from kadence.errors import TopicError
from kadence.settings import KadenceSettings

log = logging.getLogger(__name__)

SAFE_COPIES = 3


@dataclass(frozen=True, slots=True)
class Replication:
    factor: int
    min_insync: int

    def config(self) -> dict[str, str]:
        return {"min.insync.replicas": str(self.min_insync)}


def replication_for(settings: KadenceSettings, brokers: int) -> Replication:
    """The replication for topics Kadence creates on a cluster of `brokers` brokers, or a
    `TopicError` that says what to change."""
    brokers = max(1, brokers)
    safe = min(SAFE_COPIES, brokers)
    factor = settings.replication_factor or safe
    where = f"the cluster at {settings.bootstrap_servers} has {brokers} broker(s)"
    if factor > brokers:
        raise TopicError(
            f"replication factor {factor} needs {factor} brokers and {where}. Fix: set "
            f"KADENCE_REPLICATION_FACTOR to at most {brokers}, or unset it (default: {safe})"
        )
    if factor < safe and not settings.allow_under_replicated:
        raise TopicError(
            f"replication factor {factor} is below {safe} and {where}: a topic with fewer copies "
            "loses Kadence's schedules and runs with one disk. Fix: unset "
            f"KADENCE_REPLICATION_FACTOR (default: {safe}), or set "
            "KADENCE_ALLOW_UNDER_REPLICATED=true to accept it"
        )
    min_insync = settings.min_insync_replicas or (2 if factor >= SAFE_COPIES else 1)
    if min_insync > factor:
        raise TopicError(
            f"min.insync.replicas {min_insync} is above the replication factor {factor}: every "
            "write would fail. Fix: set KADENCE_MIN_INSYNC_REPLICAS to at most the factor"
        )
    return Replication(factor, min_insync)


def cluster_replication(settings: KadenceSettings, timeout_s: float = 30.0) -> Replication:
    """The replication for topics created on the cluster the settings name (asks its size)."""
    admin = AdminClient({**settings.kafka_common(), "socket.connection.setup.timeout.ms": 5000})
    try:
        brokers = len(admin.list_topics(timeout=timeout_s).brokers)
    except KafkaException as exc:
        raise TopicError(f"cannot reach Kafka at {settings.bootstrap_servers}: {exc}") from exc
    return replication_for(settings, brokers)


def warn_under_replicated(
    existing: Mapping[str, TopicMetadata], names: list[str], brokers: int
) -> None:
    """Existing topics with fewer copies than the cluster allows (up to 3) are used, with a
    warning: provisioning never changes a topic's replication."""
    safe = min(SAFE_COPIES, brokers)
    for name in names:
        meta = existing.get(name)
        parts = list(getattr(meta, "partitions", {}).values())
        copies = min((len(p.replicas) for p in parts), default=safe)
        if copies < safe:
            log.warning(
                "%s has %d cop%s of each partition on a cluster of %d brokers (%d wanted): "
                "raise it with kafka-reassign-partitions",
                name, copies, "y" if copies == 1 else "ies", brokers, safe,
            )  # fmt: skip
