"""A worker process: `python -m apps.worker` (make run starts one).

Joins the `<namespace>.workers` group on the executions topic and runs what falls due against
its target: HTTP webhooks, the tenant's Kafka topic, or in-process handlers registered by the
modules in KADENCE_HANDLER_MODULES.
"""

from __future__ import annotations

import argparse
import logging
import sys

from apps.processes import stop_event
from connectors import handlers
from connectors.base import Target
from connectors.http import HttpCaller
from connectors.kafka_topic import KafkaTopicCaller
from connectors.ssrf import AddressPolicy
from kadence.clock import SystemClock
from kadence.codec import Codec
from kadence.errors import KadenceError
from kadence.metrics import serve
from kadence.settings import KadenceSettings
from kadence.topics import provision
from kadence.worker.metrics import WorkerMetrics
from kadence.worker.runner import Worker


def targets(settings: KadenceSettings) -> dict[str, Target]:
    handlers.load(settings.handler_modules)
    kafka = KafkaTopicCaller(
        settings.bootstrap_servers, settings.namespace, settings.execution_partitions, Codec()
    )
    http = HttpCaller(AddressPolicy(settings.target_allow_cidrs), settings.webhook_secrets)
    return {"http": http, "kafka": kafka, "handler": handlers.call}


def build(settings: KadenceSettings) -> Worker:
    metrics = WorkerMetrics()
    serve(settings.metrics_port, metrics.registry)
    return Worker(settings, SystemClock(settings.clock_offset_ms), targets(settings), metrics)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="kadence-worker", description=__doc__).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    stop = stop_event()
    try:
        settings = KadenceSettings()
        provision(settings)
        build(settings).run(stop)
    except KadenceError as exc:
        print(f"worker: error: {exc}", file=sys.stderr, flush=True)
        return 2
    print("worker: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
