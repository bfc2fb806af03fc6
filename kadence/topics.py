"""Every Kadence topic in one place: name, key, partitions, cleanup, retention, record types.

Creating and checking them on a cluster is kadence/provisioning.py's.

The tenants' Kafka-target topics, `<namespace>.to.<tenant>.<topic>`, are named by
kadence/target_topics.py (re-exported here): one name per tenant and topic, `.`/`_` included.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from kadence.codec import Codec
from kadence.errors import GarbageBytesError, TopicError
from kadence.models import (
    CONTROL_TYPES,
    TOPIC_COMMAND_TYPES,
    ConnectionRecord,
    DeadLetter,
    ExecutionBatch,
    ExecutionOutcome,
    ExecutionOutcomes,
    ExecutionRequested,
    ExecutionRevoked,
    HistoryRecord,
    LeaseEvent,
    LeaseSnapshot,
    Rejected,
    ScheduleDefinition,
    WireModel,
)
from kadence.models.base import DEFAULT_POOL
from kadence.settings import KadenceSettings
from kadence.target_topics import target_topic

__all__ = ["target_topic"]  # one place for topic names: target topics are named here too

DAY_MS = 86_400_000
TOMBSTONE_RETENTION_MS = 7 * DAY_MS
"""How long a compacted topic keeps a delete (`delete.retention.ms`): a reader that was down
for up to a week (the query view, a restoring processor with local state) still sees it. The
broker default, one day, silently resurrects a job deleted while a reader was down longer."""


CHANGELOG_COMPACTION = (
    ("segment.bytes", str(64 * 2**20)),
    ("segment.ms", str(3_600_000)),
    ("min.cleanable.dirty.ratio", "0.2"),
)
"""The log cleaner compacts only closed segments, and a segment closes at 1 GiB or after 7 days
by default: at 10 M jobs a scheduler changelog partition (~430 MB) stayed in its first segment,
never compacted (5 165 MiB on the broker against 1 364 MiB of state), and a restore read all of
it. With 64 MiB or hourly segments and cleaning once a fifth of the log is superseded, a
partition holds about its live state plus one segment."""


class PartitionGroup(StrEnum):
    """Topics in one group share a partition count (co-partitioning)."""

    jobs = "jobs"
    executions = "executions"
    single = "single"
    """One partition: a small table every reader holds whole (connections)."""


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
    compaction: tuple[tuple[str, str], ...] = ()
    """Settings that make compaction happen (CHANGELOG_COMPACTION), set where the topic has the
    broker's default, on an existing topic too (kadence/provisioning.py)."""
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
        return {**cfg, **dict(self.compaction)}


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
    compaction=CHANGELOG_COMPACTION,
    purpose="the scheduler's state store, written inside its transactions",
)
EXECUTIONS = TopicSpec(
    "executions",
    "tenant",
    "delete",
    PartitionGroup.executions,
    (ExecutionRequested, ExecutionRevoked, ExecutionBatch),
    purpose="executions to run (one a record, or several due together in a batch; and"
    " revocations of ones dispatched ahead), drained by the workers",
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
    compaction=CHANGELOG_COMPACTION,
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
    (ExecutionOutcome, ExecutionOutcomes),
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
CONNECTIONS = TopicSpec(
    "connections",
    "tenant/name",
    "compact",
    PartitionGroup.single,
    (ConnectionRecord,),
    retention_ms=-1,
    min_compaction_lag_ms=0,
    delete_retention_ms=TOMBSTONE_RETENTION_MS,
    compaction=CHANGELOG_COMPACTION,
    purpose="tenants' connections and signing secrets, sealed; written by the API only",
)


def connections_group(namespace: str) -> str:
    """The group id of the connections readers (streams/connections.py), which join no group."""
    return f"{namespace}.connections"


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
    CONNECTIONS,
)


POOL_EXECUTIONS_PREFIX = "executions."
"""A worker pool's executions topic is `<namespace>.executions.<pool>` (the default pool's is
`executions`): the same records, partitions and retention, drained by that pool's workers."""


def pool_spec(pool: str) -> TopicSpec:
    """The executions topic of worker pool `pool` (KADENCE_POOLS)."""
    if pool == DEFAULT_POOL:
        return EXECUTIONS
    return replace(
        EXECUTIONS,
        suffix=POOL_EXECUTIONS_PREFIX + pool,
        purpose=f"executions for the workers of pool {pool}",
    )


def all_topics(settings: KadenceSettings) -> tuple[TopicSpec, ...]:
    """Every topic of this deployment: ALL_TOPICS and each named pool's executions topic."""
    return ALL_TOPICS + tuple(pool_spec(pool) for pool in settings.pools)


def workers_group(namespace: str, pool: str) -> str:
    """The consumer group of the workers of `pool`: `<ns>.workers` for the default pool (as
    before pools), `<ns>.workers.<pool>` for the others."""
    base = f"{namespace}.workers"
    return base if pool == DEFAULT_POOL else f"{base}.{pool}"


def partitions_of(spec: TopicSpec, settings: KadenceSettings) -> int:
    if spec.group is PartitionGroup.executions:
        return settings.execution_partitions
    if spec.group is PartitionGroup.single:
        return 1
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
        self.connections = CONNECTIONS.name(ns)
        self.pool_executions = {pool: pool_spec(pool).name(ns) for pool in settings.known_pools}
        """Each worker pool's executions topic, `default`'s (`executions`) included."""
        self.worker_executions = self.pool_executions[settings.worker_pool]
        """What a worker process of this deployment reads: its pool's executions topic."""

    def executions_of(self, pool: str | None) -> str:
        """The executions topic of `pool` (None: the default pool). A pool this deployment
        does not have raises TopicError (definitions naming one are refused before)."""
        name = self.pool_executions.get(pool or DEFAULT_POOL)
        if name is None:
            raise TopicError(f"worker pool {pool!r} is not one of KADENCE_POOLS")
        return name

    def spec_of(self, topic: str) -> TopicSpec:
        for spec in all_topics(self.settings):
            if spec.name(self.settings.namespace) == topic:
                return spec
        raise TopicError(f"{topic!r} is not a Kadence topic in namespace {self.settings.namespace}")
