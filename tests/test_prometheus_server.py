"""testkit/prometheus_server.py: Prometheus cannot bind port 0 and say which port it got, so the
fixture picks a free port and binds it later; a port taken in between (by another test's child)
makes it pick again instead of failing the test. Needs the `prometheus` binary, not a broker."""

from __future__ import annotations

import os
import shutil
import socket
import urllib.request
from pathlib import Path

import pytest

from testkit import prometheus_server
from testkit.ports import free_ports
from testkit.prometheus_server import PrometheusServer


@pytest.fixture
def binary() -> None:
    if shutil.which("prometheus") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("prometheus is not installed (.ci/run installs it)")
        pytest.skip("prometheus is not installed")


@pytest.mark.usefixtures("binary")
def test_a_port_taken_before_prometheus_binds_it_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        picks = iter([taken.getsockname()[1], free_ports(1)])
        monkeypatch.setattr(prometheus_server, "free_ports", lambda count: next(picks))
        server = PrometheusServer({}, tmp_path / "prom").start()
        try:
            assert server.port != taken.getsockname()[1]
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as r:
                assert r.status == 200
        finally:
            server.stop()
    assert server.proc is None
