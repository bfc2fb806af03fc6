"""The stack for live tests and the chaos suite: scheduler, reaper and workers as real processes
on the real broker, the settings that let them call a loopback target, and readers of what they
wrote."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.processes import ChildProcess
from kadence.codec import Codec
from kadence.metrics import ANY_PORT
from kadence.models import (
    DeadLetter,
    ExecutionOutcome,
    HistoryRecord,
    OutcomeStatus,
    entries_of,
)
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.scheduler_process import SchedulerProcess
from testkit.topic_reader import read_topic

CODEC = Codec()
SECRET = "whsec_" + "a2FkZW5jZS10ZXN0LXNlY3JldA=="  # base64 of "kadence-test-secret"


def execution_settings(settings: KadenceSettings, **kw: Any) -> KadenceSettings:
    """Loopback targets allowed, a signing secret, the test handlers loaded."""
    base: dict[str, Any] = {
        "target_allow_cidrs": ["127.0.0.0/8"],
        "webhook_secrets": {"acme": {"test": SECRET}},
        "handler_modules": ["testkit.handlers"],
        "redelivery_cap": 3,
    }
    return settings.model_validate({**settings.model_dump(), **base, **kw})


class WorkerProcess(ChildProcess):
    def __init__(
        self, settings: KadenceSettings, instance: str, log_dir: Path, metrics_port: int = 0
    ) -> None:
        mine = settings.model_copy(update={"instance_id": instance, "metrics_port": metrics_port})
        super().__init__(
            "apps.worker", mine, log=log_dir / f"worker-{instance}.log", session_timeout_ms=6000
        )

    def start(self) -> WorkerProcess:
        super().start()
        self.ready_when("partitions assigned", timeout=60)
        return self


class ReaperProcess(ChildProcess):
    def __init__(self, settings: KadenceSettings, state_dir: Path, metrics_port: int = 0) -> None:
        mine = settings.model_copy(
            update={"instance_id": "r", "state_dir": state_dir, "metrics_port": metrics_port}
        )
        super().__init__("apps.reaper", mine, log=state_dir / "reaper.log", session_timeout_ms=6000)

    def start(self) -> ReaperProcess:
        super().start()
        self.ready_when("restored", timeout=60)
        return self


@dataclass
class Stack:
    settings: KadenceSettings
    scheduler: SchedulerProcess
    reaper: ReaperProcess
    workers: list[WorkerProcess]

    @classmethod
    def start(cls, settings: KadenceSettings, tmp: Path, workers: int = 1) -> Stack:
        """Every process serves metrics on a port it picks (read them with `*_metrics`, or
        `runs_started` for any worker). If one fails to start, the ones already started are
        stopped."""
        with ExitStack() as started:
            sched = SchedulerProcess(settings, "s", tmp / "sched", metrics_port=ANY_PORT)
            reaper = ReaperProcess(settings, tmp / "reaper", ANY_PORT)
            ws = [WorkerProcess(settings, f"w{i}", tmp, ANY_PORT) for i in range(workers)]
            for proc in [sched, reaper, *ws]:
                started.callback(proc.stop)
                proc.start()
            started.pop_all()
        return cls(settings, sched, reaper, ws)

    @property
    def scheduler_metrics(self) -> int:
        return self.scheduler.listening("metrics")

    @property
    def reaper_metrics(self) -> int:
        return self.reaper.listening("metrics")

    @property
    def worker_metrics(self) -> int:
        return self.workers[0].listening("metrics")

    def metrics(self, port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return str(r.read().decode())

    def stop(self) -> None:
        for proc in [*self.workers, self.reaper, self.scheduler]:
            proc.stop()


def records(
    settings: KadenceSettings, topic: str, kind: type[Any], expect: int, timeout_s: float
) -> list[Any]:
    msgs = read_topic(settings.bootstrap_servers, topic, expect, timeout_s)
    out = [r for m in msgs for r in entries_of(CODEC.decode(m.value()))]
    return [r for r in out if isinstance(r, kind)]


def outcomes(
    settings: KadenceSettings, expect: int = 100_000, timeout_s: float = 2
) -> list[ExecutionOutcome]:
    return records(settings, Topics(settings).outcomes, ExecutionOutcome, expect, timeout_s)


def history(settings: KadenceSettings, timeout_s: float = 2) -> list[HistoryRecord]:
    return records(settings, Topics(settings).history, HistoryRecord, 100_000, timeout_s)


def stale_outcomes(history: list[HistoryRecord]) -> set[tuple[str | None, int | None, int | None]]:
    """(execution id, attempt, delivery) of the outcomes the scheduler recorded as not applied
    (`stale`: an older attempt, a lost lease, a second outcome of one attempt)."""
    return {
        (h.execution_id, h.attempt, h.delivery) for h in history if h.details.get("stale") == "true"
    }


def applied_successes(settings: KadenceSettings, job_id: str) -> list[ExecutionOutcome]:
    """The job's succeeded outcomes the scheduler applied. A success applied writes no history
    record (the outcome is the record of it); one not applied is recorded `stale`."""
    stale = stale_outcomes([h for h in history(settings) if h.job_id == job_id])
    return [
        o
        for o in outcomes(settings)
        if o.job_id == job_id
        and o.status is OutcomeStatus.succeeded
        and (o.execution_id, o.attempt, o.delivery) not in stale
    ]


def dead_letters(
    settings: KadenceSettings, expect: int = 1, timeout_s: float = 60
) -> list[DeadLetter]:
    return records(settings, Topics(settings).dead_letter, DeadLetter, expect, timeout_s)


def runs_started(worker: ChildProcess) -> float:
    """Executions a worker process started (its metrics: it must serve them): counted as each
    run starts, after its claim committed and before its target is called."""
    port = worker.listening("metrics")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    name = "kadence_worker_executions_started_total"
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise TimeoutError(f"waited {timeout_s} s for {what}")
