"""CPU seconds of benchmark processes, from /proc (Linux): the stack's children and the local
broker's JVM, and what that comes to per execution."""

from __future__ import annotations

import os
import subprocess
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
