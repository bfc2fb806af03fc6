"""B4 failover: one fault in a steady per-second load; how long until runs are on time again.

    python -m bench.failover [--fault worker|scheduler|broker|all] [--jobs 50] [--seconds 60]
    (make bench-failover)

The chaos suite's harness (testkit.chaos_run) runs the stack: two schedulers, the reaper, two
workers, an HTTP target in this process. `--jobs` jobs run every second for `--seconds` s (all
fast, so lateness is the fault's alone); 20 s in (`--fault-at`), one fault:
- worker:    kill -9 worker w0, not restarted (w1 takes its partitions and the reaper
             redelivers what w0 had claimed);
- scheduler: kill -9 scheduler s0, not restarted (s1 takes its partitions and restores them
             from the changelog);
- broker:    kill -9 the broker, start it again at once.
At scale (`--idle-jobs N`, issue 30): N daily definitions (B5's, none due during the run) are
loaded and ingested first, so the schedulers' state is that big; `--wipe` deletes the killed
scheduler's state directory (its host is lost); `--no-standby` runs the schedulers without
standby copies (KADENCE_STANDBY=false), to compare; `--ahead MS` sets the schedulers' look-ahead
(KADENCE_DISPATCH_AHEAD_MS; 0: each run dispatched at its due time, so a take-over is not hidden
by runs already dispatched ahead). For a scheduler fault, `takeover_s` is the time from the kill
until the survivor had restored the last of the partitions it took.
From the target's log (every HTTP call, with the execution's due time): start lateness
before and after the fault, the time from the fault until the last start later than 1 s
("back on time"), and the checker's lost and duplicated counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.scheduler import RESULTS, load, percentiles, wait_ingested
from kadence.models import CronSchedule, KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from testkit.chaos_run import Run, now_ms
from testkit.checker import Event, check

STANDBY_CATCH_UP_S = 15
"""After the idle jobs are ingested: time for each scheduler's standby copies to catch up."""
FAULT_AT_S = 20
"""Seconds into the load when the fault lands (`--fault-at`)."""
ON_TIME_S = 1.0


def inject(run: Run, fault: str) -> None:
    if fault == "worker":
        run.say("kill -9 worker w0 (not restarted)")
        run.worker_procs[0].signal(signal.SIGKILL)
    elif fault == "scheduler":
        run.say("kill -9 scheduler s0 (not restarted)")
        run.schedulers[0].signal(signal.SIGKILL)
    else:
        from infra.kafka import kafkactl  # noqa: PLC0415

        cfg = kafkactl.BrokerConfig.from_env()
        run.say("kill -9 the broker, then start it")
        kafkactl.kill(cfg)
        kafkactl.start(cfg)


def daily(i: int, hour: int) -> ScheduleDefinition:
    """A daily job at minute i % 60 of `hour` (UTC): state to hold, nothing to run meanwhile."""
    return ScheduleDefinition(
        tenant=f"idle-{i % 1000}",
        job_id=f"daily-{i}",
        version=1,
        schedule=CronSchedule(expression=f"{i % 60} {hour} * * *", timezone="UTC"),
        target=KafkaTarget(topic="out"),
    )


def measure(events: list[Event], fault_ms: int) -> dict[str, Any]:
    """Lateness of each execution's first target call, split at the fault, and the time from
    the fault until the last late one."""
    first: dict[str, tuple[int, int]] = {}
    for e in sorted((e for e in events if e["kind"] == "hit"), key=lambda e: int(e["at_ms"])):
        first.setdefault(str(e["execution_id"]), (int(e["due_ms"]), int(e["at_ms"])))
    before = [(at - due) / 1000 for due, at in first.values() if due < fault_ms]
    after = [(at - due) / 1000 for due, at in first.values() if due >= fault_ms]
    late_at = [at for due, at in first.values() if (at - due) / 1000 > ON_TIME_S]
    late_after = [at for at in late_at if at >= fault_ms]
    worst: dict[int, float] = {}  # second since the fault (by due time) -> worst lateness
    for due, at in first.values():
        second = (due - fault_ms) // 1000
        worst[second] = max(worst.get(second, 0.0), (at - due) / 1000)
    report = check(events)
    return {
        "start_lateness_before_fault_s": percentiles(before),
        "start_lateness_from_fault_s": percentiles(after),
        "late_starts_over_1s": len(late_at),
        "back_on_time_after_s": round((max(late_after) - fault_ms) / 1000, 2)
        if late_after
        else 0.0,
        "worst_lateness_by_due_second_from_fault_s": {
            str(k): round(v, 2) for k, v in sorted(worst.items()) if k >= -5
        },
        "expected": report.expected,
        "lost": len(report.lost),
        "duplicated_calls": report.same_key_duplicates,
        "differently_keyed_duplicates": len(report.different_key_duplicates),
        "early": len(report.early),
        "checker_ok": report.ok,
        "checker": report.render(),
    }


def failover(
    fault: str,
    jobs: int,
    seconds: int,
    bootstrap: str,
    fault_at_s: int = FAULT_AT_S,
    *,
    idle_jobs: int = 0,
    wipe: bool = False,
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"kadence-bench-failover-{fault}-"))
    run = Run(f"failover-{fault}", 1, bootstrap, root, n_schedulers=2)
    run.state_read_s = 5 + idle_jobs / 10_000  # the whole changelog: its jobs' final state
    run.start()
    ingest_s = 0.0
    try:
        if idle_jobs:
            hour = (time.gmtime().tm_hour + 12) % 24  # far from now: none fires during the run
            load(run.settings, (daily(i, hour) for i in range(idle_jobs)))
            ingest_s = wait_ingested(run.settings, timeout_s=max(600, idle_jobs / 500))
            time.sleep(STANDBY_CATCH_UP_S)
        _defs, end = run.jobs(jobs, seconds, lead_s=5, paths=("/ok",))
        start_ms = end - (seconds - 1) * 1000
        fault_ms = start_ms + fault_at_s * 1000
        run.sleep_until(fault_ms)
        fault_ms = now_ms()
        inject(run, fault)
        if wipe and fault == "scheduler":
            run.say("delete s0's state directory (its host is lost)")
            shutil.rmtree(root / "s0", ignore_errors=True)
        events = run.quiesce(end)
    finally:
        run.stop()
    restores = [  # the survivor's, after the fault: how much a take-over read, and how long
        line.strip()
        for log in sorted((root / "s1").glob("*.log"))
        for line in log.read_text(errors="replace").splitlines()
        if " restored: " in line
    ]
    after = [ms for ms in map(_logged_ms, restores) if ms is not None and ms > fault_ms]
    result = {
        "fault": fault,
        "jobs_every_second": jobs,
        "seconds": seconds,
        "fault_after_s": fault_at_s,
        "idle_jobs": idle_jobs,
        "ingest_s": round(ingest_s, 1),
        "state_wiped": wipe,
        "standby": run.settings.standby,
        "dispatch_ahead_ms": run.settings.dispatch_ahead_ms,
        **measure(events, fault_ms),
        "survivor_restores": restores[-3:],
        **(
            {"takeover_s": round((max(after) - fault_ms) / 1000, 2)}
            if fault == "scheduler" and after
            else {}
        ),
        "log": run.log,
    }
    if result["checker_ok"]:
        run.cleanup()
    return result


def _logged_ms(line: str) -> int | None:
    """The epoch ms of a log line's `asctime` (this host's local time), None if it has none."""
    try:
        at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")  # the log is in local time
    except ValueError:
        return None
    return int(at.timestamp() * 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.failover", description=__doc__)
    parser.add_argument("--fault", choices=["worker", "scheduler", "broker", "all"], default="all")
    parser.add_argument("--jobs", type=int, default=50, help="jobs, each every second")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--fault-at", type=int, default=FAULT_AT_S, help="seconds into the load")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--idle-jobs", type=int, default=0, help="daily definitions loaded first")
    parser.add_argument("--wipe", action="store_true", help="delete the killed scheduler's state")
    parser.add_argument("--no-standby", action="store_true", help="KADENCE_STANDBY=false")
    parser.add_argument("--ahead", type=int, default=None, help="KADENCE_DISPATCH_AHEAD_MS")
    args = parser.parse_args(argv)
    if args.ahead is not None:
        os.environ["KADENCE_DISPATCH_AHEAD_MS"] = str(args.ahead)
    if args.no_standby:
        os.environ["KADENCE_STANDBY"] = "false"  # the harness's settings, hence its children
    faults = ["worker", "scheduler", "broker"] if args.fault == "all" else [args.fault]
    args.results.mkdir(parents=True, exist_ok=True)
    failed = 0
    for fault in faults:
        print(f"== failover: {fault} ({args.jobs} jobs every second for {args.seconds} s)")
        started = time.monotonic()
        if not 0 < args.fault_at < args.seconds:
            parser.error("--fault-at must fall inside the load's --seconds")
        result = failover(
            fault,
            args.jobs,
            args.seconds,
            args.bootstrap,
            args.fault_at,
            idle_jobs=args.idle_jobs,
            wipe=args.wipe,
        )
        result["wall_s"] = round(time.monotonic() - started, 1)
        (args.results / f"failover-{fault}.json").write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k != "log"}, indent=2))
        failed += not result["checker_ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
