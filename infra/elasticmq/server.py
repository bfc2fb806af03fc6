"""A local SQS-compatible server (ElasticMQ) for the SQS target: its jars from Maven Central,
run on the JVM the broker uses, bound to 127.0.0.1 on a port the system picks.

    python -m infra.elasticmq.server     # run in the foreground; prints the endpoint

Tests start one per session (tests/connectors/conftest.py) and create their own queues.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from infra.kafka.broker import java_runtime
from infra.maven import copy_dependencies

VERSION = "1.6.14"
HERE = Path(__file__).resolve().parent
CONFIG = """include classpath("application.conf")
node-address { protocol = http, host = "127.0.0.1", port = 0, context-path = "" }
rest-sqs { enabled = true, bind-port = 0, bind-hostname = "127.0.0.1", sqs-limits = strict }
rest-stats { enabled = false }
"""
_BOUND = re.compile(r"Started SQS rest server, bind address 127\.0\.0\.1:(\d+)")
ACCOUNT = "000000000000"
"""The account id in ElasticMQ's queue URLs."""


def libs(quiet: bool = False) -> Path:
    cache = Path(os.environ.get("KADENCE_CACHE_DIR") or Path.home() / ".cache" / "kadence")
    return copy_dependencies(
        HERE / "pom.xml",
        {"elasticmq.version": VERSION},
        cache / f"elasticmq-{VERSION}" / "libs",
        expect="elasticmq-server_2.13-*.jar",
        what=f"org.elasticmq:elasticmq-server_2.13:{VERSION}",
        quiet=quiet,
    )


class ElasticMQ:
    """One ElasticMQ process; `with ElasticMQ() as sqs:` starts it and always stops it."""

    def __init__(self, start_timeout_s: float = 90.0) -> None:
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self._dir = tempfile.TemporaryDirectory(prefix="kadence-elasticmq-")
        self._log = Path(self._dir.name) / "elasticmq.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue_url(self, name: str) -> str:
        return f"{self.endpoint}/{ACCOUNT}/{name}"

    def start(self) -> ElasticMQ:
        classpath = str(libs(quiet=True) / "*")
        conf = Path(self._dir.name) / "elasticmq.conf"
        conf.write_text(CONFIG)
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    java_runtime(),
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    f"-Dconfig.file={conf}",
                    "-cp",
                    classpath,
                    "org.elasticmq.server.Main",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            self.port = self._wait_bound()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_bound(self) -> int:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            found = _BOUND.search(self._log.read_text(errors="replace"))
            if found:
                return int(found.group(1))
            assert self._proc is not None
            if self._proc.poll() is not None:
                break
            time.sleep(0.2)
        tail = self._log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"ElasticMQ did not start within {self.start_timeout_s:.0f} s:\n{tail}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=15)
        self._proc = None
        self._dir.cleanup()

    def call(self, action: str, request: dict[str, object]) -> dict[str, object]:
        """One SQS API call (JSON protocol), unsigned: for tests and set-up."""
        req = urllib.request.Request(  # noqa: S310 - our own local server
            self.endpoint + "/",
            data=json.dumps(request).encode(),
            headers={
                "content-type": "application/x-amz-json-1.0",
                "x-amz-target": f"AmazonSQS.{action}",
            },
        )
        with urllib.request.urlopen(req, timeout=30) as response:  # noqa: S310
            answer: dict[str, object] = json.loads(response.read() or b"{}")
            return answer

    def create_queue(self, name: str) -> str:
        attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        self.call("CreateQueue", {"QueueName": name, "Attributes": attributes})
        return self.queue_url(name)

    def receive(self, queue_url: str, wait_s: int = 1) -> list[dict[str, Any]]:
        """Up to 10 messages, with their attributes; each is deleted once read."""
        answer = self.call(
            "ReceiveMessage",
            {
                "QueueUrl": queue_url,
                "MaxNumberOfMessages": 10,
                "WaitTimeSeconds": wait_s,
                "MessageAttributeNames": ["All"],
            },
        )
        messages = answer.get("Messages") or []
        assert isinstance(messages, list)
        for m in messages:
            self.call("DeleteMessage", {"QueueUrl": queue_url, "ReceiptHandle": m["ReceiptHandle"]})
        return messages

    def __enter__(self) -> ElasticMQ:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main() -> int:
    with ElasticMQ() as server:
        print(f"ElasticMQ {VERSION} on {server.endpoint} (Ctrl-C stops it)", flush=True)
        print(f"queue URLs: {server.queue_url('<name>')}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
