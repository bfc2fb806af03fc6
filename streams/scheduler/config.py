"""What a scheduler processor is configured with (apps/scheduler.py builds it from settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kadence.topics import Topics
from streams.scheduler.breaker import DEFAULTS, BreakerConfig


@dataclass(frozen=True)
class SchedulerConfig:
    topics: Topics
    job_partitions: int
    execution_partitions: int
    tzdb: str
    misfire_grace_ms: int = 30_000
    dispatch_ahead_ms: int = 0
    backfill_per_tenant_per_s: int = 500
    breaker: BreakerConfig = DEFAULTS
    tenant_shards: Mapping[str, int] = field(default_factory=dict)
    name: str = "scheduler"
    tenant_fires_per_s: int = 0
    """Scheduled runs a tenant may fire per second of due time (0: no cap; tenant_limits)."""
    tenant_fires_by_tenant: Mapping[str, int] = field(default_factory=dict)
    tenant_in_flight: int = 0
    """Runs of a tenant in progress at once before its scheduled occurrences wait (0: no cap)."""
    tenant_in_flight_by_tenant: Mapping[str, int] = field(default_factory=dict)
    command_hold_ms: int = 30_000
    """How long a command for a job whose definition this partition has not read waits for
    it before it is refused (held_commands.py; 0: refused at once)."""
    execution_batches: bool = True
    """Kafka-topic executions of one tenant due at one instant, dispatched in one transaction,
    go out as one ExecutionBatch record (batching.py)."""
    write_behind: bool = False
    """An outcome that changes nothing but its job's runs leaves the job's state unwritten
    until its next write (the runner writes it after `write_behind_ms`; write_behind.py)."""
