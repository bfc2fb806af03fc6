"""`python -m apps.scheduler`: one scheduler process. Run N of them against any cluster; they
share the partitions through the consumer group and take over each other's on failure.

Environment: KADENCE_* settings (KADENCE_BOOTSTRAP_SERVERS, KADENCE_NAMESPACE,
KADENCE_INSTANCE_ID, KADENCE_STATE_DIR, ...). `--in-memory` keeps state in memory (restored from
the changelog at every start).
"""

from __future__ import annotations

import sys

from apps.processes import process_main
from kadence.clock import Clock, SystemClock
from kadence.codec import Codec
from kadence.metrics import serve
from kadence.settings import KadenceSettings
from kadence.timeengine.zones import tzdb_version
from kadence.topics import Topics
from streams.kafkaio.clients import Clients, KafkaClients
from streams.runtime.config import RunnerConfig
from streams.runtime.loop import Runner
from streams.runtime.metrics import RuntimeCollector
from streams.scheduler.breaker import BreakerConfig
from streams.scheduler.metrics import SchedulerCollector, SchedulerMetrics
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor

APP = "scheduler"


def wire(
    settings: KadenceSettings, clients: Clients, clock: Clock, *, in_memory: bool = False
) -> Runner:
    """The scheduler's runtime loop on `clients` and `clock`, not yet subscribed: what this
    process runs, and what the test driver turns on its in-memory cluster."""
    topics = Topics(settings)
    state_dir = settings.state_dir / settings.namespace / APP / settings.instance_id
    processor = SchedulerProcessor(
        SchedulerConfig(
            topics=topics,
            job_partitions=settings.partitions,
            execution_partitions=settings.execution_partitions,
            tzdb=tzdb_version(),
            misfire_grace_ms=settings.misfire_grace_ms,
            command_hold_ms=settings.command_hold_ms,
            dispatch_ahead_ms=settings.dispatch_ahead_ms,
            backfill_per_tenant_per_s=settings.backfill_runs_per_tenant_per_s,
            tenant_shards=settings.tenant_shards,
            tenant_fires_per_s=settings.tenant_fires_per_s,
            tenant_fires_by_tenant=settings.tenant_fires_per_s_by_tenant,
            tenant_in_flight=settings.tenant_max_in_flight,
            tenant_in_flight_by_tenant=settings.tenant_max_in_flight_by_tenant,
            write_behind=settings.write_behind_ms > 0,
            execution_batches=settings.execution_batches,
            breaker=BreakerConfig(
                failure_ratio=settings.breaker_failure_ratio,
                min_attempts=settings.breaker_min_attempts,
                window_ms=settings.breaker_window_ms,
                cooldown_ms=settings.breaker_cooldown_ms,
            ),
        ),
        Codec(),
        SchedulerMetrics(),
    )
    cfg = RunnerConfig(
        app=f"{settings.namespace}.{APP}",
        instance_id=settings.instance_id,
        input_topics=[topics.schedules, topics.commands, topics.scheduler_control, topics.outcomes],
        changelog_topic=topics.scheduler_changelog,
        state_dir=None if in_memory else state_dir,
        session_timeout_ms=settings.session_timeout_ms,
        standby_partitions=settings.partitions if settings.standby else 0,
        max_fires_per_turn=settings.fires_per_transaction,
        replay_topics=(topics.outcomes,),  # also at 0: what an earlier run left is replayed
        write_behind_ms=settings.write_behind_ms,
    )
    runner = Runner(cfg, processor, clock, clients)
    # a tenant's runs per second are counted over the partitions the process owns together
    processor.tenants.use.owned = lambda: len(runner.tasks)
    return runner


def build(settings: KadenceSettings, in_memory: bool = False) -> Runner:
    clock = SystemClock(settings.clock_offset_ms)
    runner = wire(settings, KafkaClients(settings), clock, in_memory=in_memory)
    processor = runner.processor
    assert isinstance(processor, SchedulerProcessor)
    registry = processor.metrics.registry
    registry.register(
        SchedulerCollector(
            # a copy of the tasks: the loop thread may reassign partitions meanwhile
            dead_letters=lambda: sum(
                processor.dead_letter_depth(t) for t in list(runner.tasks.values())
            ),
            partitions=lambda: len(runner.tasks),
            job_partitions=settings.partitions,
        )
    )
    registry.register(RuntimeCollector(runner))
    serve(settings.metrics_port, registry, settings.metrics_host)
    return runner


def main(argv: list[str] | None = None) -> int:
    return process_main(
        "scheduler", __doc__, argv, lambda settings, in_memory: build(settings, in_memory).run
    )


if __name__ == "__main__":
    sys.exit(main())
