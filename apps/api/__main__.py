"""`python -m apps.api`: the HTTP API and dashboard on KADENCE_API_HOST:KADENCE_API_PORT (port 0:
one the system picks, announced as `api listening on <host>:<port>`)."""

from __future__ import annotations

import logging
import sys

import uvicorn

from apps.api.app import create_app
from apps.api.callers import Callers
from apps.api.slow_clients import Guard, guarded_h11
from apps.processes import announce, log_version
from kadence.settings import KadenceSettings


def server_config(settings: KadenceSettings) -> uvicorn.Config:
    """uvicorn serving the app: at most KADENCE_API_MAX_CONNECTIONS connections and requests
    at once, 503 past them; of those, at most KADENCE_API_MAX_UNAUTHENTICATED without a known
    token, and each request head within KADENCE_API_HEAD_TIMEOUT_S (apps/api/slow_clients.py,
    on uvicorn's h11 protocol whatever else is installed)."""
    total = settings.api_max_connections
    callers = Callers.of(settings)
    guard = Guard(
        callers.known,
        settings.api_head_timeout_s,
        settings.api_max_unauthenticated or max(1, total // 4),
    )
    return uvicorn.Config(
        create_app(settings, callers),
        host=settings.api_host,
        port=settings.api_port,
        log_level="warning",
        http=guarded_h11(guard),
        ws="none",  # no WebSocket routes; an upgrade would take the connection from the guard
        limit_concurrency=total,
    )


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    log_version("api")
    settings = KadenceSettings()
    if not (settings.api_tokens or settings.api_tokens_file or settings.api_jwks_url):
        print(
            "api: KADENCE_API_TOKENS is empty (and no token file or JWKS), so every request "
            "will be refused (401). Make a token with `kadence token`.",
            file=sys.stderr,
        )
    config = server_config(settings)
    sock = config.bind_socket()
    sock.listen(config.backlog)  # connects queue from the announcement on; port 0 works
    host, port = sock.getsockname()[:2]
    print(f"api: http://{host}:{port}/ on {settings.namespace}", flush=True)
    announce("api", host, port)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return 0 if server.started else 3  # as uvicorn.run: the app failed to start


if __name__ == "__main__":
    sys.exit(main())
