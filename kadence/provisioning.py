"""Provisioning: creating and checking Kadence's topics on a cluster (`kadence topics --create`,
every process at start), a tenant's ingress topics (`kadence topics --ingress`), and deleting a
namespace (tests).

`provision()` creates what is missing and refuses to run against a topic whose partition count
or cleanup policy differs from what Kadence needs (co-partitioning and compaction are
correctness properties here, not tuning). On an existing compacted topic it raises
`delete.retention.ms` to what Kadence needs (never lowers it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._metadata import TopicMetadata
from confluent_kafka.cimpl import NewTopic

from kadence.errors import TopicError, TopicMismatchError
from kadence.kafka_connect import ErrorLog, metadata
from kadence.replication import replication_for, warn_under_replicated
from kadence.settings import KadenceSettings
from kadence.target_topics import (
    INGRESS_KINDS,
    MAX_TOPIC_NAME,
    events_topic,
    ingress_prefix,
    ingress_topic,
    target_prefix,
)
from kadence.topics import DAY_MS, TopicSpec, all_topics, partitions_of

log = logging.getLogger(__name__)


def _admin(settings: KadenceSettings, errors: ErrorLog | None = None) -> AdminClient:
    config: dict[str, Any] = {
        **settings.kafka_common(),
        "socket.connection.setup.timeout.ms": 5000,
    }
    if errors is not None:
        config["error_cb"] = errors
    return AdminClient(config)


def provision(settings: KadenceSettings, timeout_s: float = 30.0) -> list[str]:
    """Create missing topics; verify existing ones. Returns the names it created."""
    errors = ErrorLog()
    admin = _admin(settings, errors)
    cluster = metadata(admin, errors, settings, timeout_s)
    existing = cluster.topics
    wanted = {spec.name(settings.namespace): spec for spec in all_topics(settings)}
    absent = [name for name in wanted if name not in existing]
    replication = replication_for(settings, len(cluster.brokers)) if absent else None
    missing = [
        NewTopic(
            name,
            num_partitions=partitions_of(wanted[name], settings),
            replication_factor=replication.factor,
            config={**wanted[name].config(), **replication.config()},
        )
        for name in absent
        if replication is not None
    ]
    warn_under_replicated(existing, list(wanted), len(cluster.brokers))
    created: list[str] = []
    if missing:
        created = _create(admin, missing, timeout_s)
        existing = _wait_visible(admin, [t.topic for t in missing], timeout_s)
    _verify(admin, settings, wanted, existing, timeout_s)
    if created:
        log.info("created topics: %s", ", ".join(created))
    return created


def _wait_visible(
    admin: AdminClient, names: list[str], timeout_s: float
) -> dict[str, TopicMetadata]:
    """Metadata once every new topic shows its partitions (creation is asynchronous)."""
    deadline = time.monotonic() + timeout_s
    while True:
        topics = admin.list_topics(timeout=timeout_s).topics
        ready = all(n in topics and topics[n].error is None and topics[n].partitions for n in names)
        if ready or time.monotonic() > deadline:
            return topics
        time.sleep(0.1)


def _topic_configs(admin: AdminClient, names: list[str], timeout_s: float) -> dict[str, Any]:
    """Each topic's configuration. On a cluster of several brokers a topic just created may not
    be known yet to the broker that answers (UNKNOWN_TOPIC_OR_PART): asked again until it is."""
    deadline = time.monotonic() + timeout_s
    while True:
        resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in names]
        futures = admin.describe_configs(resources, request_timeout=timeout_s)
        try:
            return {r.name: f.result(timeout=timeout_s) for r, f in futures.items()}
        except KafkaException as exc:
            code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
            if code != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _verify(
    admin: AdminClient,
    settings: KadenceSettings,
    wanted: dict[str, TopicSpec],
    existing: Mapping[str, object],
    timeout_s: float,
) -> None:
    problems: list[str] = []
    changes: dict[str, dict[str, str]] = {}
    configs = _topic_configs(admin, list(wanted), timeout_s)
    for name, config in configs.items():
        spec = wanted[name]
        meta = existing.get(name)
        have_parts = len(getattr(meta, "partitions", {}))
        want_parts = partitions_of(spec, settings)
        if have_parts != want_parts:
            problems.append(
                f"{name} has {have_parts} partitions, Kadence needs {want_parts} "
                f"(co-partitioned with the other '{spec.group}' topics)"
            )
        policy = config["cleanup.policy"].value
        if set(policy.split(",")) != set(spec.cleanup.split(",")):
            problems.append(f"{name} has cleanup.policy={policy}, Kadence needs {spec.cleanup}")
        kept = config.get("delete.retention.ms")
        want = spec.delete_retention_ms
        if want is not None and kept is not None and int(kept.value or 0) < want:
            changes.setdefault(name, {})["delete.retention.ms"] = str(want)
        for key, value in spec.compaction:  # an operator's own value is theirs
            entry = config.get(key)
            if entry is None or entry.is_default:
                changes.setdefault(name, {})[key] = value
    if problems:
        raise TopicMismatchError(
            "existing topics do not match what Kadence needs:\n  - "
            + "\n  - ".join(problems)
            + "\nFix: use another KADENCE_NAMESPACE, set KADENCE_PARTITIONS/"
            "KADENCE_EXECUTION_PARTITIONS to the existing counts, or recreate the topics."
        )
    _alter(admin, changes, timeout_s)


def _alter(admin: AdminClient, changes: dict[str, dict[str, str]], timeout_s: float) -> None:
    """Set what existing topics lack: `delete.retention.ms` where deletes are kept for less than
    Kadence needs, the changelogs' compaction settings where the broker's defaults apply. One
    incremental alter, touching those keys only. Without the AlterConfigs permission it warns
    with the command to run and carries on (a short tombstone window loses deletes only for a
    reader down longer than it; default segments make restores read more, not wrongly)."""
    if not changes:
        return
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                for key, value in wanted.items()
            ],
        )
        for name, wanted in changes.items()
    ]
    altered = admin.incremental_alter_configs(resources, request_timeout=timeout_s)
    for resource, future in altered.items():
        wanted = changes[resource.name]
        said = ",".join(f"{k}={v}" for k, v in wanted.items())
        try:
            future.result(timeout=timeout_s)
            log.info("%s: set %s", resource.name, said)
        except KafkaException as exc:
            log.warning(
                "%s lacks settings Kadence needs and could not be changed (%s). "
                "Fix: kafka-configs.sh --alter --entity-type topics --entity-name %s "
                "--add-config %s",
                resource.name,
                exc,
                resource.name,
                said,
            )


INGRESS_RETENTION_MS = 7 * DAY_MS
EVENTS_RETENTION_MS = 30 * DAY_MS


def ingress_topics(settings: KadenceSettings, tenant: str) -> list[str]:
    """The two ingress topics of `tenant`: its definitions, then its commands."""
    return [ingress_topic(settings.namespace, tenant, kind) for kind in INGRESS_KINDS]


def provision_ingress(settings: KadenceSettings, tenant: str, timeout_s: float = 30.0) -> list[str]:
    """Create `tenant`'s ingress topics where missing (`kadence topics --ingress TENANT`): as
    many partitions as the jobs' topics, delete after 7 days, replicated as Kadence's own.
    Returns the names created. The operator grants the tenant Write on exactly these
    (`kadence acls`)."""
    names = ingress_topics(settings, tenant)
    return _tenant_topics(
        settings, tenant, names, partitions=settings.partitions,
        retention_ms=INGRESS_RETENTION_MS, timeout_s=timeout_s,
    )  # fmt: skip


def provision_events(settings: KadenceSettings, tenant: str, timeout_s: float = 30.0) -> list[str]:
    """Create `tenant`'s events topic where missing (the ingress process, at its first event):
    one partition (the tenant's events in order), delete after 30 days."""
    names = [events_topic(settings.namespace, tenant)]
    return _tenant_topics(
        settings, tenant, names, partitions=1, retention_ms=EVENTS_RETENTION_MS,
        timeout_s=timeout_s,
    )  # fmt: skip


def _tenant_topics(
    settings: KadenceSettings,
    tenant: str,
    names: list[str],
    *,
    partitions: int,
    retention_ms: int,
    timeout_s: float = 30.0,
) -> list[str]:
    for name in names:
        if len(name) > MAX_TOPIC_NAME:
            raise TopicError(
                f"tenant {tenant!r} cannot have topic {name!r} under namespace "
                f"{settings.namespace!r}: longer than Kafka's {MAX_TOPIC_NAME} characters "
                "(choose a shorter tenant id or namespace)"
            )
    errors = ErrorLog()
    admin = _admin(settings, errors)
    cluster = metadata(admin, errors, settings, timeout_s)
    absent = [n for n in names if n not in cluster.topics]
    if not absent:
        return []
    replication = replication_for(settings, len(cluster.brokers))
    config = {"cleanup.policy": "delete", "retention.ms": str(retention_ms)}
    wanted = [
        NewTopic(n, num_partitions=partitions, replication_factor=replication.factor,
                 config={**config, **replication.config()})
        for n in absent
    ]  # fmt: skip
    created = _create(admin, wanted, timeout_s)
    _wait_visible(admin, created, timeout_s)
    return created


def _create(admin: AdminClient, topics: list[NewTopic], timeout_s: float) -> list[str]:
    """Create `topics`; one that already exists (made meanwhile by another) is no error.
    Returns the names this call created."""
    created: list[str] = []
    for name, future in admin.create_topics(topics, request_timeout=timeout_s).items():
        try:
            future.result()
            created.append(name)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise TopicError(f"cannot create topic {name}: {exc}") from exc
    return created


def delete_namespace(settings: KadenceSettings, timeout_s: float = 30.0) -> None:
    """Delete every topic of the namespace, the tenants' Kafka-target topics under
    `<namespace>.to.` and ingress topics under `<namespace>.from.` included (tests and
    `kadence topics --delete`)."""
    admin = _admin(settings)
    existing = admin.list_topics(timeout=timeout_s).topics
    names = [s.name(settings.namespace) for s in all_topics(settings)]
    tenants = (target_prefix(settings.namespace), ingress_prefix(settings.namespace))
    present = [n for n in names if n in existing] + [n for n in existing if n.startswith(tenants)]
    if present:
        for future in admin.delete_topics(present, operation_timeout=timeout_s).values():
            future.result()
