"""The processes an execution benchmark runs against the local broker: schedulers, the reaper
and workers as child processes (bench/execution.py, bench/sustained.py, bench/webhooks.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from apps.processes import ChildProcess
from bench.cpu import (
    broker_pids,
    cpu_seconds,
    lag_records,
    pid_cpu_seconds,
    summed,
    work_seconds,
)
from kadence.settings import KadenceSettings

INBOX_FULL = "): reading paused"
"""How the worker's line ends when its inbox is full and it stops reading: `inbox full (N
executions, B bytes): reading paused` (streams/worker/backlog.py)."""


def add_batches_flag(parser: argparse.ArgumentParser) -> None:
    """`--batches` / `--no-batches`: whether the stack's schedulers write executions in batches
    (`args.batches`; KADENCE_EXECUTION_BATCHES, on by default)."""
    parser.add_argument(
        "--batches",
        action=argparse.BooleanOptionalAction,
        default=KadenceSettings().execution_batches,
        help="KADENCE_EXECUTION_BATCHES (on by default): a tenant's Kafka-topic runs due at one "
        "instant and dispatched in one transaction go out as one ExecutionBatch record; "
        "--no-batches: a record each",
    )


class Stack:
    def __init__(
        self,
        settings: KadenceSettings,
        root: Path,
        workers: int,
        schedulers: int = 1,
        *,
        worker_metrics: bool = False,
        metrics: bool = False,
    ) -> None:
        """`worker_metrics`: the workers serve their metrics; `metrics`: every process does
        (each on a port it announces), so `work_s` can read them."""

        def child(module: str, name: str, **kw: Any) -> ChildProcess:
            mine = settings.model_copy(update={"instance_id": name, "state_dir": root / name})
            return ChildProcess(module, mine, log=root / f"{name}.log", **kw)

        served = {"metrics_port": -1}  # a port each, announced
        every = served if metrics else {}
        names = [f"s{i}" if i else "s" for i in range(schedulers)]
        self.schedulers = [child("apps.scheduler", name, **every) for name in names]
        self.reaper = child("apps.reaper", "r", **every)
        workers_too = served if metrics or worker_metrics else {}
        self.workers = [
            child("apps.worker", f"w{i}", session_timeout_ms=6000, **workers_too)
            for i in range(workers)
        ]
        self._ports: dict[int, int] = {}
        self.namespace = settings.namespace

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

    def work_s(self) -> dict[str, dict[str, float]]:
        """The loop CPU seconds each process has charged so far by kind of work, from its
        metrics (the stack must serve them: `metrics`): the schedulers summed, the reaper, the
        workers summed; a group with a process that did not answer is left out."""
        procs = {"scheduler": self.schedulers, "reaper": [self.reaper], "workers": self.workers}
        out: dict[str, dict[str, float]] = {}
        for name, group in procs.items():
            parts = [self._work_seconds(p) for p in group]
            if all(parts):
                out[name] = summed(parts)
        return out

    def _work_seconds(self, proc: ChildProcess) -> dict[str, float]:
        """`proc`'s loop CPU by kind of work (its metrics port read from its log once)."""
        port = self._port(proc)
        return {} if port is None else work_seconds(port)

    def _port(self, proc: ChildProcess) -> int | None:
        key = id(proc)
        if key not in self._ports:
            try:
                self._ports[key] = proc.listening("metrics", timeout=30)
            except (TimeoutError, RuntimeError):  # no metrics, or it exited
                return None
        return self._ports[key]

    def inbox_pauses(self) -> dict[str, int]:
        """How many times each worker stopped reading with its inbox full so far, from its log
        (streams/worker/backlog.py): runs due soon wait behind what it holds meanwhile."""
        return {f"w{i}": w.output().count(INBOX_FULL) for i, w in enumerate(self.workers)}

    def schedulers_behind(self) -> dict[str, int]:
        """The records the schedulers have yet to read, by topic without the namespace (their
        `kadence_consumer_lag_records`, summed): work a window's end leaves for later."""
        behind: dict[str, int] = {}
        prefix = self.namespace + "."
        for proc in self.schedulers:
            port = self._port(proc)
            for topic, n in (lag_records(port) if port is not None else {}).items():
                name = topic.removeprefix(prefix)
                behind[name] = behind.get(name, 0) + n
        return behind
