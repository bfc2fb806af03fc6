"""`kadence.metrics.serve` without a listening server: what it registers is what a test reads."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kadence import metrics

PORT = 9100


def without_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `metrics.serve` register its collectors and report PORT, opening nothing."""

    class Server:
        server_address = ("127.0.0.1", PORT)

    def start_http_server(port: int, addr: str, registry: CollectorRegistry) -> tuple[Any, None]:
        return Server(), None

    monkeypatch.setattr(metrics, "start_http_server", start_http_server)
