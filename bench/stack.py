"""The processes an execution benchmark runs against the local broker: schedulers, the reaper
and workers as child processes (bench/execution.py, bench/sustained.py, bench/webhooks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apps.processes import ChildProcess
from bench.cpu import broker_pids, cpu_seconds, pid_cpu_seconds
from kadence.settings import KadenceSettings


class Stack:
    def __init__(
        self,
        settings: KadenceSettings,
        root: Path,
        workers: int,
        schedulers: int = 1,
        *,
        worker_metrics: bool = False,
    ) -> None:
        def child(module: str, name: str, **kw: Any) -> ChildProcess:
            mine = settings.model_copy(update={"instance_id": name, "state_dir": root / name})
            return ChildProcess(module, mine, log=root / f"{name}.log", **kw)

        metrics = {"metrics_port": -1} if worker_metrics else {}  # a port each, announced
        names = [f"s{i}" if i else "s" for i in range(schedulers)]
        self.schedulers = [child("apps.scheduler", name) for name in names]
        self.reaper = child("apps.reaper", "r")
        self.workers = [
            child("apps.worker", f"w{i}", session_timeout_ms=6000, **metrics)
            for i in range(workers)
        ]

    def start(self) -> Stack:
        for proc in (*self.schedulers, self.reaper, *self.workers):
            proc.start()
        for s in self.schedulers:
            s.wait_for(" restored: ", timeout=120)
        for w in self.workers:
            w.wait_for("partitions assigned", timeout=120)
        return self

    def stop(self) -> None:
        for proc in (*self.workers, self.reaper, *self.schedulers):
            proc.stop()

    def pids(self) -> dict[str, list[int]]:
        procs = {"scheduler": self.schedulers, "reaper": [self.reaper], "workers": self.workers}
        return {k: [p.proc.pid for p in v if p.proc is not None] for k, v in procs.items()}

    def cpu_s(self) -> dict[str, float]:
        """CPU seconds (user + system) each process has used so far: the schedulers summed, the
        reaper, and the workers summed."""
        workers = sum(cpu_seconds(w) for w in self.workers)
        return {
            "scheduler": sum(cpu_seconds(s) for s in self.schedulers),
            "reaper": cpu_seconds(self.reaper),
            "workers": workers,
            "broker": sum(pid_cpu_seconds(pid) for pid in broker_pids()),
        }
