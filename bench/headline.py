"""One line per B2 rate that says what matters (issue 44, item 6): on time or not, and what an
execution cost — CPU by process, then by kind of work in each process, and records written by
topic — so a regression shows in the figure itself, not in a JSON read afterwards.

    3000/s on time: visible p99 0.82 s, 3 028/s done | CPU µs/exec: scheduler 212, workers 140,
    broker 87, reaper 5 = 444 | CPU µs/exec by work: scheduler outcomes 61, fire 49, ...,
    other threads 30; workers deliver 36, read 29, ... | records/exec: executions 1.0,
    outcomes 1.0, scheduler-changelog 1.22, ... = 4.3 (1 881 B)
"""

from __future__ import annotations

from typing import Any

from bench.cpu import COLLECTOR, OTHER_THREADS
from bench.misfire_skips import NOTICED_BUCKET_S

LAST = (OTHER_THREADS, COLLECTOR)
"""Shown after a process's kinds of work, not among them."""

PROCESS_ORDER = ("scheduler", "workers", "broker", "reaper")


def _n(value: float) -> str:
    """A count as the docs write it: thousands split by a thin space-like blank."""
    return f"{value:,.0f}".replace(",", " ")


def cpu_part(cpu: dict[str, Any]) -> str:
    """`scheduler 212, workers 140, ... = 444`: the processes by their usual order, then any
    other the run measured, then the total."""
    named = [p for p in PROCESS_ORDER if p in cpu]
    named += sorted(p for p in cpu if p not in PROCESS_ORDER and p != "total")
    parts = ", ".join(f"{p} {_n(cpu[p])}" for p in named)
    return f"{parts} = {_n(cpu['total'])}" if "total" in cpu else parts


def work_part(by_work: dict[str, dict[str, Any]]) -> str:
    """`scheduler outcomes 61, fire 49, ...; workers read 29, ...`: the processes by their usual
    order, each one's kinds of work most first (as measured), `other threads` last, then what
    the collector took of all that; kinds under half a microsecond are left out (the row has
    them)."""
    named = [p for p in PROCESS_ORDER if p in by_work]
    named += sorted(p for p in by_work if p not in PROCESS_ORDER)
    parts = []
    for process in named:
        kinds = by_work[process]
        shown = [k for k in kinds if k not in LAST and abs(kinds[k]) >= 0.5]
        shown.sort(key=lambda k: -kinds[k])
        shown += [OTHER_THREADS] if OTHER_THREADS in kinds else []
        if shown:
            part = f"{process} " + ", ".join(f"{k} {_n(kinds[k])}" for k in shown)
            if COLLECTOR in kinds:  # part of the above, not added to it
                part += f" (of which the collector {_n(kinds[COLLECTOR])})"
            parts.append(part)
    return "; ".join(parts)


def records_part(written: dict[str, Any]) -> str:
    """`executions 1.0, outcomes 1.0, ... = 4.3 (1 881 B)`: topics by records per execution,
    most first, then all of them together."""
    topics = sorted(
        ((t, v) for t, v in written.items() if t != "all"), key=lambda tv: -tv[1]["records"]
    )
    parts = ", ".join(f"{t} {v['records']:.2g}" for t, v in topics)
    every = written.get("all")
    if every is None:
        return parts
    return f"{parts} = {every['records']:.2g} ({_n(every['bytes'])} B)"


def _where(row: dict[str, Any]) -> str:
    """Where and when the skipped runs were decided: how many jobs, on which job partitions,
    how many seconds after the window's start."""
    detail = row.get("skipped_late_detail")
    if not detail:
        return ""
    partitions = ",".join(str(p) for p in detail["by_job_partition"])
    noticed = [int(s) for s in detail["noticed_s_after_start"]]
    by_cap = ", ".join(f"{cap} {_n(n)}" for cap, n in detail.get("throttled_by", {}).items())
    others = ", ".join(
        f"{name} {_n(n)}" + (f" ({by_cap})" if name == "throttled" and by_cap else "")
        for name, n in detail.get("decisions", {}).items()
        if name not in ("coalesced", "missed")
    )
    return (
        f": {_n(detail['jobs'])} jobs on job partitions {partitions},"
        f" decided {min(noticed)}-{max(noticed) + NOTICED_BUCKET_S} s after the start"
        + (f"; history also says {others}" if others else "")
    )


def headline(row: dict[str, Any]) -> str:
    """The line for one rate's row of bench.sustained."""
    verdict = "on time" if row.get("on_time") else "NOT on time"
    p99 = row.get("visible_p99_after_warm_up_s", row.get("p99_after_warm_up_s"))
    kind = "visible p99" if "visible_p99_after_warm_up_s" in row else "p99"
    line = f"{row['rate_per_s']}/s {verdict}: {kind} {p99} s"
    if "completed_per_s" in row:
        line += f", {_n(row['completed_per_s'])}/s done"
    if row.get("skipped_late"):  # never started, on purpose: bench/misfire_skips.py
        line += f", {_n(row['skipped_late'])} skipped late (missed-run policy{_where(row)})"
    if row.get("lost"):
        line += f", {_n(row['lost'])} LOST"
        jobs = (row.get("lost_detail") or {}).get("jobs")
        if jobs:  # which, and their history: `lost_detail` (bench/lost_runs.py)
            line += f" (of {_n(jobs)} jobs: lost_detail)"
    pauses = sum((row.get("inbox_full") or {}).values())
    if pauses:  # reading paused: runs due soon waited behind what the worker held
        line += f", a worker's inbox full {_n(pauses)} times (reading paused)"
    behind = (row.get("scheduler_behind_at_end") or {}).get("outcomes", 0)
    if behind:  # outcomes left for after the window: their CPU is not in the figures below
        line += f", the scheduler {_n(behind)} outcome records behind at the window's end"
    during = row.get("scheduler_outcomes_behind_in_window") or {}
    if during.get("max"):  # the lag that takes tenants to their in-flight cap
        line += f" ({_n(during['max'])} at most in the window, {_n(during['mean'])} on average)"
    if "cpu_us_per_execution" in row:
        line += f" | CPU µs/exec: {cpu_part(row['cpu_us_per_execution'])}"
    if row.get("cpu_us_per_execution_by_work"):
        line += f" | CPU µs/exec by work: {work_part(row['cpu_us_per_execution_by_work'])}"
    if row.get("bench_cpu_us_per_execution"):  # on the same cores, not in the total
        line += f" | the bench's own CPU µs/exec: {cpu_part(row['bench_cpu_us_per_execution'])}"
    if "written_per_execution" in row:
        line += f" | records/exec: {records_part(row['written_per_execution'])}"
    return line
