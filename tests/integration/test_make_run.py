"""`make run`'s entry point against the test broker: provisions, says what runs, stops on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kadence.provisioning import delete_namespace
from kadence.settings import KadenceSettings
from kadence.topics import ALL_TOPICS
from testkit.process_tree import stop_group

REPO = Path(__file__).resolve().parents[2]
API_LISTENING = re.compile(r"^api listening on \S+:(\d+)$", re.M)


def _wait_status(url: str, headers: dict[str, str], timeout_s: float = 60) -> int:
    """The HTTP status of GET url, once the server answers at all."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=5
            ) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                return int(exc.code)
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _readme_ingress_example(bootstrap: str, namespace: str, job_url: str, token: str) -> None:
    """docs/kafka.md's kcat lines for a tenant, as written (the namespace aside): the demo tenant's
    job goes in through its ingress topic and shows in the API; the null value deletes it."""
    if shutil.which("kcat") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed (.ci/run installs it)")
        pytest.skip("kcat is not installed")
    text = (REPO / "docs" / "kafka.md").read_text()
    block = text[text.index("A **tenant** produces to") :]
    block = block[block.index("```sh\n") + 6 : block.index("```", block.index("```sh") + 5)]
    put, delete = block.split("\necho 'demo/hello|' ")
    delete = "echo 'demo/hello|' " + delete
    env = {**os.environ, "B": bootstrap}
    for command in (put, delete):
        assert "kadence.from.demo.schedules" in command
    auth = {"Authorization": f"Bearer {token}"}

    def run(command: str) -> None:
        mine = command.replace("kadence.from.demo.", f"{namespace}.from.demo.")
        subprocess.run(["sh", "-c", mine], env=env, check=True, timeout=60)

    run(put)
    deadline = time.monotonic() + 60
    while _wait_status(job_url, auth) != 200:
        assert time.monotonic() < deadline, "the documented job never showed in the API"
        time.sleep(0.5)
    run(delete)
    while _wait_status(job_url, auth) != 404:
        assert time.monotonic() < deadline, "the documented delete never took effect"
        time.sleep(0.5)


def test_run_provisions_topics_and_stops_cleanly(kafka_bootstrap: str) -> None:
    namespace = f"run-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "KADENCE_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "KADENCE_NAMESPACE": namespace,
        "KADENCE_PARTITIONS": "2",
        "KADENCE_EXECUTION_PARTITIONS": "2",
        "KADENCE_API_PORT": "0",  # the API and the view bind ports the system picks, and
        "KADENCE_VIEW_PORT": "0",  # say which (run.py tells the API where the view is)
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "apps.stack"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a failure stops make run's children too (stop_group)
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
            if "kadence: ready" in "".join(lines) and API_LISTENING.search("".join(lines)):
                break
        output = "".join(lines)
        assert "kadence: ready" in output, output
        api = API_LISTENING.search(output)
        assert api is not None, output
        api_port = int(api[1])
        for process in ("scheduler", "reaper", "worker", "ingress", "views", "api"):
            assert f"{process} started" in output
        # the API answers with the development token it printed where to find
        assert ".run/dev-token" in output
        token = (REPO / ".run" / "dev-token").read_text().strip()
        url = f"http://127.0.0.1:{api_port}/v1/jobs"
        # "ready" means ready: the first write through the API is answered and shown, with no
        # retrying (the view's input used to die on a leader election at start: 503 forever)
        job = {
            "schedule": {"kind": "cron", "expression": "0 0 1 1 *"},
            "target": {"kind": "kafka", "topic": "out"},
        }
        first = urllib.request.Request(
            f"{url}/first",
            data=json.dumps(job).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(first, timeout=30) as r:
            assert r.status == 201
            assert json.loads(r.read())["job_id"] == "first"
        status = _wait_status(url, {"Authorization": f"Bearer {token}"})
        assert status == 200
        # connections work out of the box: sealed with the development key it made
        assert ".run/secrets-key" in output
        made = urllib.request.Request(
            f"http://127.0.0.1:{api_port}/v1/connections/demo-api",
            data=json.dumps({"kind": "bearer", "token": "dev-bearer"}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="PUT",
        )
        with urllib.request.urlopen(made, timeout=30) as r:
            shown = json.loads(r.read())
            assert (r.status, shown["kind"], shown["version"]) in (
                (201, "bearer", 1),
                (200, "bearer", shown["version"]),  # a .run/ kept from an earlier run
            )
            assert "dev-bearer" not in json.dumps(shown)
        assert _wait_status(url, {}) == 401
        _readme_ingress_example(kafka_bootstrap, namespace, f"{url}/hello", token)
        # every process serves /metrics where infra/prometheus/prometheus.yml scrapes it
        for port, metric in [
            (9101, "kadence_scheduler_dispatch_lateness_seconds"),
            (9102, "kadence_reaper_lease_expiries"),
            (9103, "kadence_worker_start_lateness_seconds"),
            (9104, "kadence_view_caught_up 1.0"),
            (9105, "kadence_ingress_records_total"),
        ]:
            assert _wait_status(f"http://127.0.0.1:{port}/metrics", {}) == 200
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                assert metric in r.read().decode()
        topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
        for spec in ALL_TOPICS:
            assert spec.name(namespace) in topics
            assert spec.name(namespace) in output
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "kadence: stopped" in rest
    finally:
        stop_group(proc)
        delete_namespace(KadenceSettings(bootstrap_servers=kafka_bootstrap, namespace=namespace))
