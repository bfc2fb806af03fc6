"""A reaper process: `python -m apps.reaper` (make run starts one).

Owns lease expiry for its share of the `leases` partitions: redelivers executions whose worker
went silent, and gives up on ones past the redelivery cap (the scheduler dead-letters them).
Run several with distinct KADENCE_INSTANCE_IDs; they share the partitions like schedulers do.
"""

from __future__ import annotations

import sys
from functools import partial

from apps.processes import process_main
from kadence.clock import Clock, SystemClock
from kadence.codec import Codec
from kadence.metrics import serve
from kadence.models.base import DEFAULT_POOL
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.kafkaio.clients import Clients, KafkaClients
from streams.reaper.metrics import ReaperMetrics
from streams.reaper.pool_watch import PoolWatch
from streams.reaper.processor import ReaperConfig, ReaperProcessor
from streams.reaper.reader import ConsumerReader, ExecutionReader
from streams.runtime.config import RunnerConfig
from streams.runtime.loop import Runner
from streams.runtime.metrics import RuntimeCollector

APP = "reaper"


def wire(
    settings: KadenceSettings,
    clients: Clients,
    clock: Clock,
    *,
    in_memory: bool = False,
    reader: ExecutionReader | None = None,
) -> Runner:
    """The reaper's runtime loop on `clients` and `clock`, not yet subscribed: what this
    process runs, and what the test driver turns on its in-memory cluster. Expired lease
    snapshots are read back from `executions` by `reader` (by default a plain consumer that
    joins no group)."""
    topics = Topics(settings)
    group = f"{settings.namespace}.{APP}.reader"
    client = f"{settings.namespace}.{APP}.{settings.instance_id}.reader"
    if reader is None:
        reader = ConsumerReader(lambda: clients.consumer(group, client), topics.executions)
    pool_readers = {  # each builds its consumer on first use: none for a pool never expired
        pool: ConsumerReader(partial(clients.consumer, group, f"{client}.{pool}"), topic)
        for pool, topic in topics.pool_executions.items()
        if pool != DEFAULT_POOL
    }
    state_dir = settings.state_dir / settings.namespace / APP / settings.instance_id
    processor = ReaperProcessor(
        ReaperConfig(
            topics=topics,
            job_partitions=settings.partitions,
            execution_partitions=settings.execution_partitions,
            redelivery_cap=settings.redelivery_cap,
            tenant_shards=settings.tenant_shards,
        ),
        Codec(),
        ReaperMetrics(),
        reader,
        pool_readers,
    )
    cfg = RunnerConfig(
        app=f"{settings.namespace}.{APP}",
        instance_id=settings.instance_id,
        input_topics=[topics.leases],
        changelog_topic=topics.reaper_changelog,
        state_dir=None if in_memory else state_dir,
        session_timeout_ms=settings.session_timeout_ms,
        standby_partitions=settings.partitions if settings.standby else 0,
        max_fires_per_turn=settings.fires_per_transaction,
    )
    return Runner(cfg, processor, clock, clients)


def build(settings: KadenceSettings, in_memory: bool = False) -> Runner:
    clock = SystemClock(settings.clock_offset_ms)
    runner = wire(settings, KafkaClients(settings), clock, in_memory=in_memory)
    processor = runner.processor
    assert isinstance(processor, ReaperProcessor)
    metrics = processor.metrics
    metrics.registry.register(RuntimeCollector(runner))
    PoolWatch(settings, KafkaClients(settings), clock, metrics.registry).start()
    serve(settings.metrics_port, metrics.registry, settings.metrics_host)
    return runner


def main(argv: list[str] | None = None) -> int:
    return process_main(
        "reaper", __doc__, argv, lambda settings, in_memory: build(settings, in_memory).run
    )


if __name__ == "__main__":
    sys.exit(main())
