"""`make run`'s entry point against the test broker: provisions, says what runs, stops on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from kadence.settings import KadenceSettings
from kadence.topics import ALL_TOPICS, delete_namespace

REPO = Path(__file__).resolve().parents[2]


def test_run_provisions_topics_and_stops_cleanly(kafka_bootstrap: str) -> None:
    namespace = f"run-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "KADENCE_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "KADENCE_NAMESPACE": namespace,
        "KADENCE_PARTITIONS": "2",
        "KADENCE_EXECUTION_PARTITIONS": "2",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "apps.run"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "kadence: ready" in line:
                break
        output = "".join(lines)
        assert "kadence: ready" in output, output
        for process in ("scheduler", "reaper", "worker"):
            assert f"{process} started" in output
        assert "HTTP API + dashboard: not built yet" in output
        topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
        for spec in ALL_TOPICS:
            assert spec.name(namespace) in topics
            assert spec.name(namespace) in output
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "kadence: stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
        delete_namespace(KadenceSettings(bootstrap_servers=kafka_bootstrap, namespace=namespace))
