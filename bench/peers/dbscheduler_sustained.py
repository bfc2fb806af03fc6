"""db-scheduler under B2's sustained open-loop load, judged as bench/sustained.py judges Kadence.

    python -m bench.peers dbscheduler-sustained --rates 500,1000,2000 --seconds 60 [--poll-ms 500]

For each rate R, a fresh PostgreSQL 15 cluster (fsync and synchronous_commit on) and one
scheduler JVM (64 threads, lock-and-fetch polling as in the burst peer) run R executions due at
each second of the window. Each is its own one-time task instance "i@t" due at second t, stored
by a feeder thread in the JVM (`scheduleBatch`, 1000 a transaction) ten seconds before t on the
wall clock: open loop, as Kadence's `* * * * * *` jobs with overlap allowed. db-scheduler's own
recurring tasks are not: one row per task, rescheduled when a run completes, and its cron
schedule computes the next time from the completion time, so a late run skips the seconds it
missed instead of queueing them (CronSchedule.getNextExecutionTime). The handler appends its
start to a file; lateness is start - due per instance, and the verdict and the knee come from
bench.sustained's functions. CPU: the JVM and every PostgreSQL process, from /proc, between the
end of the warm-up and the end of the window."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.cpu import pid_cpu_seconds, tree_cpu_seconds
from bench.peers.dbscheduler_peer import build, postgres
from bench.sustained import WARM_UP_S, knee, summarize

LEAD_S = 15
"""From the command to the window's first second: the JVM starts, the feeder stores ahead."""
AHEAD_S = 10


def run(
    rates: list[int],
    seconds: int,
    *,
    threads: int = 64,
    poll_ms: int = 500,
    pool: int = 20,
    grace_s: float | None = None,
) -> dict[str, Any]:
    jar = build()
    rows = []
    for rate in rates:
        started = time.monotonic()
        row = one_rate(
            jar, rate, seconds, threads=threads, poll_ms=poll_ms, pool=pool, grace_s=grace_s
        )
        row["wall_s"] = round(time.monotonic() - started, 1)
        print(json.dumps(row, indent=2))
        rows.append(row)
    return {
        "peer": "db-scheduler",
        "mode": "sustained",
        "knee_per_s": knee(rows),
        "durability": "PostgreSQL 15 (fsync on, synchronous_commit on), JDBC",
        "notes": (
            f"one scheduler JVM: {threads} threads, pollingInterval {poll_ms} ms,"
            f" pollUsingLockAndFetch(1.0, 4.0), HikariCP pool of {pool}; each execution a"
            f" one-time task instance due at its second, stored {AHEAD_S} s ahead by a feeder"
            " thread in the same JVM (scheduleBatch, 1000 a transaction); the handler appends"
            " its start to a file; completed_per_s counts handler starts"
        ),
        "rates": rows,
    }


def one_rate(
    jar: Path,
    rate: int,
    seconds: int,
    *,
    threads: int,
    poll_ms: int,
    pool: int,
    grace_s: float | None,
) -> dict[str, Any]:
    expect = rate * seconds
    grace = grace_s if grace_s is not None else 10 + max(60, expect / 100)  # as bench.sustained
    with postgres() as (url, root):
        env = {**os.environ, "PEER_JDBC_URL": url, "PEER_JDBC_USER": "postgres"}
        env["PEER_POOL"] = str(pool)
        csv, log = root / "starts.csv", root / "scheduler.log"
        start_s = float(int(time.time()) + LEAD_S)
        end_s = start_s + seconds
        print(f"db-scheduler: {rate}/s for {seconds} s from {start_s:.0f}, poll {poll_ms} ms")
        command = ["java", "-jar", str(jar), "sustain", str(threads), str(csv), str(poll_ms)]
        command += [str(rate), str(seconds), str(int(start_s)), str(AHEAD_S)]
        with log.open("w") as log_file:
            jvm = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        postmaster = int((root / "data" / "postmaster.pid").read_text().split()[0])
        warm_up = min(WARM_UP_S, seconds / 3)
        cpu = _Cpu({"jvm": jvm.pid, "postgresql": postmaster}, start_s + warm_up, end_s).start()
        starts = _Starts(csv)
        try:
            while len(starts.first) < expect and time.time() < end_s + grace:
                if jvm.poll() is not None:
                    raise RuntimeError(f"the scheduler JVM exited: {log.read_text()[-2000:]}")
                time.sleep(0.5)
                starts.read()
            time.sleep(2)  # late duplicates
            starts.read()
        finally:
            jvm.send_signal(signal.SIGTERM)  # its shutdown hook stops the scheduler
            try:
                jvm.wait(60)
            except subprocess.TimeoutExpired:
                jvm.kill()
                jvm.wait()
        starts.read()
        feeder = [json.loads(x) for x in log.read_text().splitlines() if x.startswith('{"feeder')]
    runs = [(due, t, t) for (due, t) in starts.first.values()]
    row = summarize(rate, seconds, start_s, runs)
    on_time = row.pop("on_time")
    return {
        "rate_per_s": rate,
        "seconds": seconds,
        "poll_ms": poll_ms,
        **row,
        "duplicated": starts.duplicated(),
        **_each_second(runs, start_s + min(WARM_UP_S, seconds / 3)),
        "feeder": feeder[0] if feeder else None,
        "cpu_us_per_execution": cpu.per_execution_us(rate),
        "on_time": on_time,
    }


def _each_second(runs: list[tuple[float, float, float]], after_s: float) -> dict[str, float]:
    """When each second's executions began and finished starting, after the warm-up: the median
    over seconds of the first and the last start's lateness (the wait for a poll, and the
    time to drain one second's executions, 256 per fetch)."""
    by_second: dict[float, list[float]] = {}
    for due, started, _f in runs:
        if due >= after_s:
            by_second.setdefault(due, []).append(started - due)
    if not by_second:
        return {}
    firsts = sorted(min(v) for v in by_second.values())
    lasts = sorted(max(v) for v in by_second.values())
    return {
        "each_second_first_start_p50_s": round(firsts[len(firsts) // 2], 3),
        "each_second_last_start_p50_s": round(lasts[len(lasts) // 2], 3),
    }


class _Starts:
    """The handler's "i@due,start" lines, read as the file grows: each instance's first start."""

    def __init__(self, csv: Path) -> None:
        self.csv, self.offset = csv, 0
        self.first: dict[str, tuple[float, float]] = {}
        self.counts: Counter[str] = Counter()

    def read(self) -> None:
        if not self.csv.exists():
            return
        with self.csv.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for next time
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            job, _sep, t = line.partition(",")
            self.counts[job] += 1
            self.first.setdefault(job, (float(job.partition("@")[2]), float(t)))

    def duplicated(self) -> int:
        return sum(c - 1 for c in self.counts.values())


class _Cpu:
    """Each process's CPU (with its children, for PostgreSQL's backends) at two instants; per
    execution, divided by the executions due in between."""

    def __init__(self, pids: dict[str, int], from_s: float, to_s: float) -> None:
        self.pids, self.from_s, self.to_s = pids, from_s, to_s
        self.samples: list[dict[str, float]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> _Cpu:
        self._thread.start()
        return self

    def _run(self) -> None:
        for at in (self.from_s, self.to_s):
            time.sleep(max(0.0, at - time.time()))
            self.samples.append(
                {
                    "jvm": pid_cpu_seconds(self.pids["jvm"]),
                    "postgresql": tree_cpu_seconds(self.pids["postgresql"]),
                }
            )

    def per_execution_us(self, rate: int) -> dict[str, float]:
        self._thread.join(1)
        if len(self.samples) < 2:
            return {}
        executions = rate * (self.to_s - self.from_s)
        before, after = self.samples
        out = {k: round((after[k] - before[k]) * 1e6 / executions) for k in before}
        return {**out, "total": sum(out.values())}
