"""Prometheus plumbing shared by the processes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server


def serve(port: int, registry: CollectorRegistry) -> None:
    """Serve `registry` on http://0.0.0.0:<port>/metrics (no-op for port 0)."""
    if port:
        start_http_server(port, registry=registry)
