"""A worker process: `python -m apps.worker` (make run starts one).

Joins the `<namespace>.workers` group on the executions topic and runs what falls due against
its target: HTTP webhooks, the tenant's Kafka topic, SQS queues, or in-process handlers
registered by the modules in KADENCE_HANDLER_MODULES.
"""

from __future__ import annotations

import contextlib
import resource
import sys

from apps.processes import process_main
from connectors import handlers
from connectors.aio import EventLoop
from connectors.http import HttpCaller
from connectors.http_dns import Resolver
from connectors.kafka_topic import KafkaTopicCaller
from connectors.sqs import SqsCaller
from connectors.ssrf import AddressPolicy
from kadence.clock import SystemClock
from kadence.codec import Codec
from kadence.metrics import LagCollector, serve
from kadence.replication import cluster_replication
from kadence.settings import KadenceSettings
from kadence.targets import Target
from streams.connections import ConnectionStore
from streams.kafkaio.clients import KafkaClients
from streams.worker.loop import Worker
from streams.worker.metrics import WorkerMetrics


def targets(settings: KadenceSettings) -> dict[str, Target]:
    handlers.load(settings.handler_modules)
    kafka = KafkaTopicCaller(
        settings.kafka_common(),
        settings.namespace,
        settings.target_topic_partitions,
        Codec(),
        lambda: cluster_replication(settings),
    )
    policy = AddressPolicy(settings.target_allow_cidrs, settings.target_allow_cidrs_by_tenant)
    loop = EventLoop("targets")  # HTTP, SQS and async handlers: no thread per run
    warm_s = settings.worker_http_warm_ms / 1000
    resolver = Resolver(  # one DNS cache for the webhook and the queue targets
        policy, ttl_min_s=settings.worker_dns_ttl_min_s, ttl_max_s=settings.worker_dns_ttl_max_s
    )
    keyring = settings.keyring()
    connections = None
    if keyring is not None:  # the tenants' connections, read whole from their topic
        ns = settings.namespace
        connections = ConnectionStore(KafkaClients(settings), ns, f"{ns}.worker").start()
    http = HttpCaller(
        policy,
        settings.webhook_secrets,
        loop=loop,
        warm_s=warm_s,
        resolver=resolver,
        connections=connections,
        keyring=keyring,
    )
    sqs = SqsCaller(policy, settings.sqs_credentials, loop=loop, resolver=resolver)
    handler = handlers.HandlerCaller(loop)
    return {"http": http, "kafka": kafka, "handler": handler, "sqs": sqs}


def more_open_files() -> None:
    """The soft open-files limit raised to the hard one: each HTTP or SQS run in flight holds a
    socket (`worker_async_max_in_flight` of them at most)."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def build(settings: KadenceSettings) -> Worker:
    more_open_files()
    metrics = WorkerMetrics()
    clock = SystemClock(settings.clock_offset_ms)
    worker = Worker(settings, clock, targets(settings), metrics, KafkaClients(settings))
    metrics.registry.register(LagCollector(worker.lag))
    serve(settings.metrics_port, metrics.registry, settings.metrics_host)
    return worker


def main(argv: list[str] | None = None) -> int:
    return process_main("worker", __doc__, argv, lambda settings, _in_memory: build(settings).run)


if __name__ == "__main__":
    sys.exit(main())
