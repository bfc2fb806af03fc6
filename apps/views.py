"""The query view process: `python -m apps.views` (make run starts one).

Materializes job definitions, per-job history (decisions, attempts, dead letters, with
retention) and the dead-letter queue from the topics into RocksDB, and answers the API's
queries on 127.0.0.1:KADENCE_VIEW_PORT (0: a port the system picks, announced as
`view listening on 127.0.0.1:<port>`). One per deployment: it reads every partition.
Its metrics (streams/views/metrics.py) on KADENCE_METRICS_PORT, as every process's.
It answers only requests with KADENCE_VIEW_TOKEN and a loopback (or KADENCE_VIEW_HOSTS) Host.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from apps.processes import announce, process_main
from kadence.clock import Clock, SystemClock
from kadence.errors import KadenceError
from kadence.metrics import serve as serve_metrics
from kadence.settings import KadenceSettings
from streams.kafkaio.clients import Clients, KafkaClients
from streams.views.access import ViewAccess
from streams.views.materializer import Materializer
from streams.views.metrics import view_registry
from streams.views.server import serve
from streams.views.store import ViewStore

APP = "views"


def wire(
    settings: KadenceSettings, clients: Clients, clock: Clock, *, in_memory: bool = False
) -> Materializer:
    """The view's input loop on `clients` and `clock`, not yet assigned: what this process
    runs, and what the test driver turns on its in-memory cluster. `in_memory` starts the
    store empty (it is read again from the topics)."""
    path = settings.state_dir / settings.namespace / APP / settings.instance_id
    if in_memory:
        ViewStore.wipe(path)
    return Materializer(settings, ViewStore(path), clock, clients=clients)


def build(settings: KadenceSettings, in_memory: bool = False) -> Callable[[threading.Event], None]:
    access = ViewAccess(settings.view_token.get_secret_value(), settings.view_hosts)
    clock = SystemClock(settings.clock_offset_ms)
    materializer = wire(settings, KafkaClients(settings), clock, in_memory=in_memory)
    server = serve(settings.view_port, materializer, access=access)
    announce("view", *server.socket.getsockname()[:2])
    serve_metrics(settings.metrics_port, view_registry(materializer), settings.metrics_host)

    def run(stop: threading.Event) -> None:
        """Serve until told to stop. Should the input loop end by itself (it waits out passing
        broker errors, so only a real one ends it), the view is not ready from then on and the
        process exits with the reason, for its supervisor to restart it."""
        loop = threading.Thread(target=materializer.run, name="view-input", daemon=True)
        loop.start()
        try:
            while not stop.wait(1.0):
                if not loop.is_alive():
                    raise KadenceError(
                        f"the query view stopped reading its topics: {materializer.stopped_by}"
                    )
        finally:
            materializer.stop()
            loop.join(10)
            server.shutdown()
            materializer.store.close()

    return run


def main(argv: list[str] | None = None) -> int:
    return process_main("views", __doc__, argv, build)


if __name__ == "__main__":
    sys.exit(main())
