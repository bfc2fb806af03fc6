"""Scheduler processes for integration tests: real subprocesses, real broker, real signals."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from pathlib import Path

from apps.processes import ChildProcess
from kadence.codec import Codec
from kadence.models import ExecutionRequested, HistoryRecord, Rejected
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from tests.kafka_helpers import read_topic

CODEC = Codec()


class SchedulerProcess(ChildProcess):
    """A scheduler subprocess with its own instance id and state folder; a 6 s session timeout
    so failover tests are quick."""

    def __init__(
        self, settings: KadenceSettings, instance: str, state_dir: Path, **env: str | int
    ) -> None:
        mine = settings.model_copy(update={"instance_id": instance, "state_dir": state_dir})
        super().__init__(
            "apps.scheduler",
            mine,
            log=state_dir / f"scheduler-{instance}.log",
            session_timeout_ms=6000,
            **env,
        )

    def start(self, wait_assigned: bool = True) -> SchedulerProcess:
        super().start()
        if wait_assigned:
            self.wait_for("restored", timeout=60)
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.signal(sig)


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
