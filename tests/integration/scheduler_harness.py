"""Scheduler processes for integration tests: real subprocesses, real broker, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from kadence.codec import Codec
from kadence.models import ExecutionRequested, HistoryRecord, Rejected
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from tests.kafka_helpers import read_topic

REPO = Path(__file__).resolve().parents[2]
CODEC = Codec()


class SchedulerProcess:
    def __init__(
        self, settings: KadenceSettings, instance: str, state_dir: Path, **env: str | int
    ) -> None:
        self.settings = settings
        self.instance = instance
        self.state_dir = state_dir
        self.log = state_dir / f"scheduler-{instance}.log"
        self.env = {
            **os.environ,
            "KADENCE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
            "KADENCE_NAMESPACE": settings.namespace,
            "KADENCE_PARTITIONS": str(settings.partitions),
            "KADENCE_EXECUTION_PARTITIONS": str(settings.execution_partitions),
            "KADENCE_INSTANCE_ID": instance,
            "KADENCE_STATE_DIR": str(state_dir),
            "KADENCE_SESSION_TIMEOUT_MS": "6000",
            **{f"KADENCE_{k.upper()}": str(v) for k, v in env.items()},
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_assigned: bool = True) -> SchedulerProcess:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "apps.scheduler"],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if wait_assigned:
            self.wait_for("restored", timeout=60)
        return self

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"scheduler exited: {self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"no {text!r} in {self.log}: {self.log.read_text()[-3000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def executions(
    settings: KadenceSettings, expect: int, timeout_s: float = 30
) -> list[ExecutionRequested]:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).executions, expect, timeout_s)
    out = [CODEC.decode_as(m.value(), ExecutionRequested) for m in msgs]
    return out


def history(settings: KadenceSettings, expect: int, timeout_s: float = 10) -> list[HistoryRecord]:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).history, expect, timeout_s)
    return [CODEC.decode_as(m.value(), HistoryRecord) for m in msgs]


def rejected(settings: KadenceSettings, expect: int, timeout_s: float = 10) -> list[Rejected]:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).rejected, expect, timeout_s)
    return [CODEC.decode_as(m.value(), Rejected) for m in msgs]


def counts(items: Iterable[ExecutionRequested]) -> dict[str, int]:
    out: dict[str, int] = {}
    for ex in items:
        out[ex.execution_id] = out.get(ex.execution_id, 0) + 1
    return out
