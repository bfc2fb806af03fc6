"""The README's quick start, run as written against the test broker (issue 31): `make run`, a
signed webhook call at `kadence receive` within a minute, a JSON record read with kcat, and the
"From code" examples: the tenant's (`ApiClient`: a job created, run at the receiver, paused) and
the operator's (straight to Kafka: the job shown by the API).

What the test changes, and only that, so that it can run beside the rest of the suite: its own
namespace (KADENCE_NAMESPACE, and the topic name kcat reads), the test broker's address (for
127.0.0.1:19092), the API and view on ports the system picks (KADENCE_API_URL then tells the CLI
the API's), metrics off, and the receiver on a port it picks (`--port 0`, put in the job's URL
for 8099, also in the `ApiClient` example). Each substitution must find its text, so a README
that drops one fails here.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from kadence.api_client import ApiClient
from kadence.provisioning import delete_namespace
from kadence.settings import KadenceSettings
from testkit.process_tree import stop_group
from testkit.stack import until

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"kadence: ready at (http://127\.0\.0\.1:\d+)")
RECEIVE_LINE = "kadence receive --secret-file .run/dev-webhook-secret &"

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def quick_start() -> list[str]:
    """The quick start's shell blocks, in order, then the "From code" Python blocks: the
    tenant's (through the API) and the operator's (straight to Kafka)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Quick start\n") : text.index("## The two commands\n")]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    code = text[text.index("## From code\n") : text.index("## Documentation\n")]
    return [*blocks, *re.findall(r"```python\n(.*?)```", code, re.S)]


def swap(text: str, old: str, new: str) -> str:
    assert old in text, f"the README no longer has {old!r}"
    return text.replace(old, new)


class Lines:
    """A child's output, line by line, readable with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)

    def until(self, pattern: re.Pattern[str], timeout_s: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if found := pattern.search(line):
                return found
        raise AssertionError(f"no {pattern.pattern!r} in {timeout_s} s: {''.join(self.seen)}")


@pytest.fixture
def stack(kafka_bootstrap: str) -> Iterator[tuple[dict[str, str], str]]:
    """Step 1, `make run`, until it says it is ready: the environment the next steps run in."""
    if shutil.which("kcat") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("kcat is not installed (.ci/run installs it)")
        pytest.skip("kcat is not installed")
    namespace = f"qs-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "KADENCE_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "KADENCE_NAMESPACE": namespace,
        "KADENCE_PARTITIONS": "2",
        "KADENCE_EXECUTION_PARTITIONS": "2",
        "KADENCE_API_PORT": "0",
        "KADENCE_VIEW_PORT": "0",
        "KADENCE_METRICS_PORT": "0",
    }
    for name in ("KADENCE_API_TOKENS", "KADENCE_WEBHOOK_SECRETS", "KADENCE_TOKEN"):
        env.pop(name, None)
    [make_run] = quick_start()[0].strip().splitlines()
    proc = subprocess.Popen(
        ["bash", "-c", make_run],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        url = Lines(proc.stdout).until(READY, 240)[1]
        yield {**env, "KADENCE_API_URL": url}, namespace
    finally:
        stop_group(proc)
        delete_namespace(KadenceSettings(bootstrap_servers=kafka_bootstrap, namespace=namespace))


def shell(script: str, env: dict[str, str], timeout_s: float = 120) -> str:
    done = subprocess.run(
        ["bash", "-ec", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{script}\nexit {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout


def test_the_quick_start_as_written(
    stack: tuple[dict[str, str], str], kafka_bootstrap: str
) -> None:
    env, namespace = stack
    _, receiver_block, hello, report, tenant_code, operator_code = quick_start()
    setup = swap(receiver_block, RECEIVE_LINE, "")
    receive = swap(RECEIVE_LINE, " &", " --port 0")
    receiver = subprocess.Popen(
        ["bash", "-ec", f"{setup}\nexec {receive}"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert receiver.stdout is not None
        runs = Lines(receiver.stdout)
        port = runs.until(re.compile(r"receive listening on 127\.0\.0\.1:(\d+)"), 60)[1]
        started = time.monotonic()
        said = shell(setup + swap(hello, "127.0.0.1:8099", f"127.0.0.1:{port}"), env)
        assert "created hello version 1" in said and ": succeeded, started" in said, said
        call = runs.until(re.compile(r"demo/hello@\S+ +attempt 1 .*signature (\w+) +(.*)$"), 60)
        assert time.monotonic() - started < 60
        assert call[1] == "valid" and json.loads(call[2]) == {"hello": "world"}

        kcat = swap(report, "127.0.0.1:19092", kafka_bootstrap)
        kcat = swap(kcat, "kadence.to.demo.reports", f"{namespace}.to.demo.reports")
        record = json.loads(shell(setup + kcat, env).strip().splitlines()[-1])
        assert record["execution_id"].startswith("demo/report@manual:")
        assert record["target"] == {
            "kind": "kafka",
            "topic": "reports",
            "format": "json",
            "pool": None,  # the default pool
        }

        python = str(REPO / ".venv" / "bin" / "python")
        token = (REPO / ".run" / "dev-token").read_text().strip()  # step 2 exported it
        tenant_code = swap(tenant_code, "127.0.0.1:8099", f"127.0.0.1:{port}")
        printed = subprocess.run(
            [python, "-c", tenant_code],
            cwd=REPO,
            env={**env, "KADENCE_TOKEN": token},
            check=True,
            timeout=60,
            capture_output=True,
            text=True,
        ).stdout
        assert printed.split()[0] == "succeeded", printed
        call = runs.until(re.compile(r"demo/nightly-export@\S+ +attempt 1 .*signature (\w+)"), 30)
        assert call[1] == "valid"
        with ApiClient(env["KADENCE_API_URL"], token) as api:
            until(lambda: api.job("nightly-export")["state"] == "paused", 30, "the pause")
            assert api.job("nightly-export")["paused_reason"] == "until the new bucket exists"

        subprocess.run([python, "-c", operator_code], cwd=REPO, env=env, check=True, timeout=60)
        got = shell(setup + "until kadence get weekday-report --json; do sleep 0.5; done", env)
        assert json.loads(got)["definition"]["target"]["secret_ref"] == "demo-hooks"
    finally:
        stop_group(receiver, signal.SIGTERM)
