"""Every Kadence topic in one place: name, key, partitions, cleanup, retention, record types.

`provision()` creates what is missing and refuses to run against a topic whose partition count
or cleanup policy differs from what Kadence needs (co-partitioning and compaction are
correctness properties here, not tuning). On an existing compacted topic it raises
`delete.retention.ms` to what Kadence needs (never lowers it).

The tenants' Kafka-target topics, `<namespace>.to.<tenant>.<topic>`, are named by
kadence/target_topics.py (re-exported here): one name per tenant and topic, `.`/`_` included.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._metadata import TopicMetadata
from confluent_kafka.cimpl import NewTopic

from kadence.codec import Codec
from kadence.errors import GarbageBytesError, TopicError, TopicMismatchError
from kadence.kafka_connect import ErrorLog, metadata
from kadence.models import (
    CONTROL_TYPES,
    TOPIC_COMMAND_TYPES,
    DeadLetter,
    ExecutionOutcome,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    LeaseEvent,
    LeaseSnapshot,
    Rejected,
    ScheduleDefinition,
    WireModel,
)
from kadence.replication import replication_for, warn_under_replicated
from kadence.settings import KadenceSettings
from kadence.target_topics import target_prefix, target_topic

__all__ = ["target_topic"]  # one place for topic names: target topics are named here too

DAY_MS = 86_400_000
TOMBSTONE_RETENTION_MS = 7 * DAY_MS
"""How long a compacted topic keeps a delete (`delete.retention.ms`): a reader that was down
for up to a week (the query view, a restoring processor with local state) still sees it. The
broker default, one day, silently resurrects a job deleted while a reader was down longer."""
log = logging.getLogger(__name__)


class PartitionGroup(StrEnum):
    """Topics in one group share a partition count (co-partitioning)."""

    jobs = "jobs"
    executions = "executions"


@dataclass(frozen=True)
class TopicSpec:
    suffix: str
    key: str
    cleanup: str
    group: PartitionGroup
    records: tuple[type[WireModel], ...]
    retention_ms: int = 7 * DAY_MS
    min_compaction_lag_ms: int | None = None
    delete_retention_ms: int | None = None
    """Compacted topics: how long a tombstone outlives compaction (see TOMBSTONE_RETENTION_MS)."""
    json_input: bool = False
    """Humans may write JSON here (kcat -P); Avro is what Kadence itself writes."""
    purpose: str = ""

    def name(self, namespace: str) -> str:
        return f"{namespace}.{self.suffix}"

    def decode(self, codec: Codec, data: bytes | None) -> WireModel:
        """A record read from this topic: only its record types, JSON only on input topics."""
        if not self.json_input and data and data.lstrip()[:1] == b"{":
            raise GarbageBytesError(
                f"JSON is accepted only on the input topics (schedules, commands), "
                f"not on {self.suffix}"
            )
        default = self.records[0] if len(self.records) == 1 else None
        return codec.decode(data, self.records, json_default=default)

    def config(self) -> dict[str, str]:
        cfg = {"cleanup.policy": self.cleanup, "retention.ms": str(self.retention_ms)}
        if self.min_compaction_lag_ms is not None:
            cfg["min.compaction.lag.ms"] = str(self.min_compaction_lag_ms)
        if self.delete_retention_ms is not None:
            cfg["delete.retention.ms"] = str(self.delete_retention_ms)
        return cfg


SCHEDULES = TopicSpec(
    "schedules",
    "tenant/job_id",
    "compact",
    PartitionGroup.jobs,
    (ScheduleDefinition,),
    retention_ms=-1,
    min_compaction_lag_ms=DAY_MS,
    delete_retention_ms=TOMBSTONE_RETENTION_MS,
    json_input=True,
    purpose="job definitions, latest version per job; null value deletes",
)
COMMANDS = TopicSpec(
    "commands",
    "tenant/job_id",
    "delete",
    PartitionGroup.jobs,
    TOPIC_COMMAND_TYPES,
    json_input=True,
    purpose="trigger now, backfill, cancel, pause, resume, replay (control records refused)",
)
SCHEDULER_CONTROL = TopicSpec(
    "scheduler-control",
    "tenant/job_id (TenantCircuit: tenant)",
    "delete",
    PartitionGroup.jobs,
    CONTROL_TYPES,
    purpose="what only Kadence says to the schedulers: job moved, tenant circuit, letter replays",
)
SCHEDULER_CHANGELOG = TopicSpec(
    "scheduler-changelog",
    "tenant/job_id",
    "compact",
    PartitionGroup.jobs,
    (),
    retention_ms=-1,
    min_compaction_lag_ms=0,
    delete_retention_ms=TOMBSTONE_RETENTION_MS,
    purpose="the scheduler's state store, written inside its transactions",
)
EXECUTIONS = TopicSpec(
    "executions",
    "tenant",
    "delete",
    PartitionGroup.executions,
    (ExecutionRequested, ExecutionRevoked),
    purpose="executions to run (and revocations of ones dispatched ahead), drained by the workers",
)
REAPER_CHANGELOG = TopicSpec(
    "reaper-changelog",
    "execution_id (lease events) or ~held/worker_id/incarnation (snapshots)",
    "compact",
    PartitionGroup.jobs,
    (),
    retention_ms=-1,
    min_compaction_lag_ms=0,
    delete_retention_ms=TOMBSTONE_RETENTION_MS,
    purpose="the reaper's lease table, written inside its transactions",
)
LEASES = TopicSpec(
    "leases",
    "worker_id/incarnation (snapshots) or execution_id (events of earlier releases)",
    "delete",
    PartitionGroup.jobs,
    (LeaseSnapshot, LeaseEvent),
    retention_ms=2 * DAY_MS,
    purpose="worker lease snapshots (claims and heartbeats by reference), read by the reaper",
)
OUTCOMES = TopicSpec(
    "outcomes",
    "tenant/job_id",
    "delete",
    PartitionGroup.jobs,
    (ExecutionOutcome,),
    purpose="how each attempt ended",
)
HISTORY = TopicSpec(
    "history",
    "tenant/job_id",
    "delete",
    PartitionGroup.jobs,
    (HistoryRecord,),
    retention_ms=30 * DAY_MS,
    purpose="one decision record per occurrence",
)
DEAD_LETTER = TopicSpec(
    "dead-letter",
    "tenant/job_id",
    "delete",
    PartitionGroup.jobs,
    (DeadLetter,),
    retention_ms=180 * DAY_MS,
    purpose="executions given up on, payload kept for replay",
)
REJECTED = TopicSpec(
    "rejected",
    "original key",
    "delete",
    PartitionGroup.jobs,
    (Rejected,),
    retention_ms=30 * DAY_MS,
    purpose="bad input with the reason",
)

ALL_TOPICS: tuple[TopicSpec, ...] = (
    SCHEDULES,
    COMMANDS,
    SCHEDULER_CONTROL,
    SCHEDULER_CHANGELOG,
    EXECUTIONS,
    LEASES,
    REAPER_CHANGELOG,
    OUTCOMES,
    HISTORY,
    DEAD_LETTER,
    REJECTED,
)


def partitions_of(spec: TopicSpec, settings: KadenceSettings) -> int:
    if spec.group is PartitionGroup.executions:
        return settings.execution_partitions
    return settings.partitions


class Topics:
    """Resolved topic names for one namespace."""

    def __init__(self, settings: KadenceSettings) -> None:
        self.settings = settings
        ns = settings.namespace
        self.schedules = SCHEDULES.name(ns)
        self.commands = COMMANDS.name(ns)
        self.scheduler_control = SCHEDULER_CONTROL.name(ns)
        self.scheduler_changelog = SCHEDULER_CHANGELOG.name(ns)
        self.executions = EXECUTIONS.name(ns)
        self.leases = LEASES.name(ns)
        self.reaper_changelog = REAPER_CHANGELOG.name(ns)
        self.outcomes = OUTCOMES.name(ns)
        self.history = HISTORY.name(ns)
        self.dead_letter = DEAD_LETTER.name(ns)
        self.rejected = REJECTED.name(ns)

    def spec_of(self, topic: str) -> TopicSpec:
        for spec in ALL_TOPICS:
            if spec.name(self.settings.namespace) == topic:
                return spec
        raise TopicError(f"{topic!r} is not a Kadence topic in namespace {self.settings.namespace}")


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
    wanted = {spec.name(settings.namespace): spec for spec in ALL_TOPICS}
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
        for name, future in admin.create_topics(missing, request_timeout=timeout_s).items():
            try:
                future.result()
                created.append(name)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise TopicError(f"cannot create topic {name}: {exc}") from exc
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
    short_tombstones: dict[str, int] = {}
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
            short_tombstones[name] = want
    if problems:
        raise TopicMismatchError(
            "existing topics do not match what Kadence needs:\n  - "
            + "\n  - ".join(problems)
            + "\nFix: use another KADENCE_NAMESPACE, set KADENCE_PARTITIONS/"
            "KADENCE_EXECUTION_PARTITIONS to the existing counts, or recreate the topics."
        )
    _keep_tombstones(admin, short_tombstones, timeout_s)


def _keep_tombstones(admin: AdminClient, short: dict[str, int], timeout_s: float) -> None:
    """Raise `delete.retention.ms` on existing topics that keep deletes for less than Kadence
    needs: one incremental alter, touching that key only. Without the AlterConfigs permission
    it warns with the command to run and carries on (a short window loses deletes only for a
    reader down longer than it)."""
    if not short:
        return
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(
                    "delete.retention.ms", str(ms), incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        for name, ms in short.items()
    ]
    altered = admin.incremental_alter_configs(resources, request_timeout=timeout_s)
    for resource, future in altered.items():
        ms = short[resource.name]
        try:
            future.result(timeout=timeout_s)
            log.info("%s: delete.retention.ms raised to %d", resource.name, ms)
        except KafkaException as exc:
            log.warning(
                "%s keeps deletes for less than Kadence needs and could not be changed (%s). "
                "Fix: kafka-configs.sh --alter --entity-type topics --entity-name %s "
                "--add-config delete.retention.ms=%d",
                resource.name,
                exc,
                resource.name,
                ms,
            )


def delete_namespace(settings: KadenceSettings, timeout_s: float = 30.0) -> None:
    """Delete every topic of the namespace, the tenants' Kafka-target topics under
    `<namespace>.to.` included (tests and `kadence topics --delete`)."""
    admin = _admin(settings)
    existing = admin.list_topics(timeout=timeout_s).topics
    names = [s.name(settings.namespace) for s in ALL_TOPICS]
    targets = target_prefix(settings.namespace)
    present = [n for n in names if n in existing] + [n for n in existing if n.startswith(targets)]
    if present:
        for future in admin.delete_topics(present, operation_timeout=timeout_s).values():
            future.result()
