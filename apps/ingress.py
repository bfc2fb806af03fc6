"""`python -m apps.ingress`: the ingress process. It reads every tenant's ingress topics
(`<ns>.from.<tenant>.schedules|commands`) and writes what each tenant may say, for its own jobs
only, to `schedules` and `commands`; anything else goes to `rejected` with the reason. Run
several against any cluster: they share the topics' partitions through the consumer group.

The API's per-tenant quotas apply (KADENCE_API_QUOTA_*); to count jobs and place deletes it
asks the query view once per batch (KADENCE_VIEW_URL, KADENCE_VIEW_TOKEN: docs/kafka.md).

Metrics (streams/ingress/metrics.py) on KADENCE_METRICS_PORT, as every process's.

Environment: KADENCE_* settings (KADENCE_BOOTSTRAP_SERVERS, KADENCE_NAMESPACE,
KADENCE_INSTANCE_ID, ...). `--in-memory` is accepted and means nothing: it keeps no state.
"""

from __future__ import annotations

import sys

from apps.processes import process_main
from kadence.clock import SystemClock
from kadence.metrics import LagCollector, serve
from kadence.settings import KadenceSettings
from streams.ingress.loop import IngressLoop, wire
from streams.kafkaio.clients import KafkaClients


def build(settings: KadenceSettings, in_memory: bool = False) -> IngressLoop:
    del in_memory  # no state
    loop = wire(settings, KafkaClients(settings), SystemClock(settings.clock_offset_ms))
    loop.metrics.registry.register(LagCollector(loop.lag))
    serve(settings.metrics_port, loop.metrics.registry, settings.metrics_host)
    return loop


def main(argv: list[str] | None = None) -> int:
    return process_main(
        "ingress", __doc__, argv, lambda settings, in_memory: build(settings, in_memory).run
    )


if __name__ == "__main__":
    sys.exit(main())
