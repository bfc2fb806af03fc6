"""A child binds port 0 and announces the port it got; the parent reads it back. No port is
picked by the parent and handed over, so nothing else can take it in between."""

from __future__ import annotations

import urllib.request
import uuid
from pathlib import Path

import pytest

from apps.processes import ChildProcess
from kadence.settings import KadenceSettings


def _api(log: Path | None) -> ChildProcess:
    settings = KadenceSettings(
        bootstrap_servers="127.0.0.1:9",  # never contacted: /healthz needs no broker
        namespace=f"ports-{uuid.uuid4().hex[:8]}",
        api_port=0,
    )
    return ChildProcess("apps.api", settings, log=log)


def _healthz(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as r:
        return int(r.status)


def test_api_on_port_zero_announces_the_port_it_serves_on(tmp_path: Path) -> None:
    api = _api(tmp_path / "api.log")
    try:
        port = api.start().listening("api", timeout=60)
        assert port != 0
        assert _healthz(port) == 200
        assert f"api: http://127.0.0.1:{port}/ on " in api.output()
    finally:
        api.stop()


def test_a_child_without_a_log_passes_its_output_through_and_is_still_read(
    capfd: pytest.CaptureFixture[str],
) -> None:
    api = _api(None)
    try:
        port = api.start().listening("api", timeout=60)
        assert _healthz(port) == 200
        assert f"api listening on 127.0.0.1:{port}\n" in capfd.readouterr().out
    finally:
        api.stop()


def test_a_child_that_never_becomes_ready_is_stopped(tmp_path: Path) -> None:
    api = _api(tmp_path / "api.log").start()
    with pytest.raises(TimeoutError):
        api.ready_when("a line this child never prints", timeout=3)
    assert not api.running
