"""CPU seconds of benchmark processes, from /proc (Linux): the stack's children and the local
broker's JVM, and what that comes to per execution; and each Kadence process's loop CPU by kind
of work, from its metrics (`kadence_work_cpu_seconds_total{work}`, kadence/work_cpu.py)."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path

from apps.processes import ChildProcess


def cpu_seconds(child: ChildProcess) -> float:
    """User + system CPU of a running child, from /proc (Linux); 0 when it is not running."""
    if child.proc is None or child.proc.poll() is not None:
        return 0.0
    return pid_cpu_seconds(child.proc.pid)


def broker_pids() -> list[int]:
    """The local broker's JVM (the one `make broker` runs), if there is one on this machine."""
    found = subprocess.run(
        ["pgrep", "-f", "kafka.Kafka"], check=False, capture_output=True, text=True
    )
    return [int(p) for p in found.stdout.split()]


def pid_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15)


def cpu_per_execution_us(
    before: dict[str, float], after: dict[str, float], executions: int
) -> dict[str, float | None]:
    """Each process's CPU from just before the due time until the last outcome, per execution
    (idle polling in that window included), in microseconds."""
    if executions <= 0:
        return {name: None for name in before}
    return {name: round((after[name] - before[name]) * 1e6 / executions) for name in before}


WORK_SAMPLE = re.compile(r'^kadence_work_cpu_seconds_total\{work="([^"]*)"\} (\S+)$', re.M)
GC_SAMPLE = re.compile(r'^kadence_gc_seconds_total\{generation="[0-9]"\} (\S+)$', re.M)
OTHER_THREADS = "other threads"
"""A process's CPU outside its loop thread (librdkafka's threads, a worker's invocation pool):
its CPU from /proc less what its loop charged to the kinds of work."""
COLLECTOR = "collector"
"""What Python's cyclic collector took of the process's CPU, in any thread
(`kadence_gc_seconds_total`, kadence/gc_time.py): already inside the kinds and other threads,
not added to them."""


def scraped(port: int, timeout_s: float = 5.0) -> str | None:
    """What a process serves on 127.0.0.1:`port`/metrics; None when it cannot be read."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as r:
            text: str = r.read().decode()
    except OSError:
        return None
    return text


def work_seconds(port: int, timeout_s: float = 5.0) -> dict[str, float]:
    """The loop CPU seconds a process has charged so far, by kind of work, read from its
    metrics on 127.0.0.1:`port`; {} when they cannot be read."""
    text = scraped(port, timeout_s)
    if text is None:
        return {}
    out = {work: float(value) for work, value in WORK_SAMPLE.findall(text)}
    collected = GC_SAMPLE.findall(text)
    if collected:
        out[COLLECTOR] = sum(map(float, collected))
    return out


LAG_SAMPLE = re.compile(
    r'^kadence_consumer_lag_records\{group="[^"]*",topic="([^"]*)"\} (\S+)$', re.M
)


def lag_records(port: int, timeout_s: float = 5.0) -> dict[str, int]:
    """The records a process's consumer has yet to read, by topic (its
    `kadence_consumer_lag_records`), read from its metrics on 127.0.0.1:`port`; {} when they
    cannot be read."""
    text = scraped(port, timeout_s)
    if text is None:
        return {}
    return {topic: round(float(n)) for topic, n in LAG_SAMPLE.findall(text)}


def summed(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Several processes' seconds by kind of work, added kind by kind."""
    total: dict[str, float] = {}
    for part in parts:
        for work, seconds in part.items():
            total[work] = total.get(work, 0.0) + seconds
    return total


def work_per_execution_us(
    before: Mapping[str, Mapping[str, float]],
    after: Mapping[str, Mapping[str, float]],
    executions: int,
    cpu_us: Mapping[str, float | None],
) -> dict[str, dict[str, float]]:
    """Each process's loop CPU per execution by kind of work, in microseconds, most first, then
    `other threads` (its CPU per execution in `cpu_us` less the kinds' sum) when it has one,
    then `collector` (part of those, in any thread) when the process counts it."""
    out: dict[str, dict[str, float]] = {}
    if executions <= 0:
        return out
    for name, end in after.items():
        start = before.get(name, {})
        kinds = {w: (s - start.get(w, 0.0)) * 1e6 / executions for w, s in end.items()}
        collector = kinds.pop(COLLECTOR, None)
        ordered: dict[str, float] = {
            w: round(us) for w, us in sorted(kinds.items(), key=lambda wu: -wu[1])
        }
        whole = cpu_us.get(name)
        if whole is not None and kinds:
            ordered[OTHER_THREADS] = round(whole - sum(kinds.values()))
        if collector is not None:
            ordered[COLLECTOR] = round(collector)
        out[name] = ordered
    return out


def tree_cpu_seconds(pid: int) -> float:
    """A process's CPU with its children's: its own, what its exited children left it (cutime,
    cstime) and each live child's (PostgreSQL's postmaster and its backends; /proc, Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    total = sum(int(f) for f in fields[11:15]) / ticks  # utime, stime, cutime, cstime
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            child = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(child[1]) == pid:  # ppid (field 4)
            total += (int(child[11]) + int(child[12])) / ticks
    return total
