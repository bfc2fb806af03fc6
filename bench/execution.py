"""Execution-path benchmarks against the local broker: real scheduler, reaper and workers.

    make bench-execution     # throughput and recovery, figures in bench/results/execution-*.json

throughput: N one-off jobs with the Kafka topic target, due at the same second T (loaded
            beforehand); measures end to end, dispatch -> worker -> outcome recorded: the
            executions per second from T until the last outcome, start lateness (outcome
            started_at - due) p50/p99/max, and the lost/duplicated counts. `--no-batches`:
            KADENCE_EXECUTION_BATCHES=false (a record per run, not ExecutionBatch records).
noisy:      B3, the noisy neighbour: one tenant floods with N jobs due at T while S small
            tenants have K jobs each due at T (in-process no-op handler: runs that hold a
            slot; Kafka topic runs take none since 8954184). Measures the small tenants'
            start lateness p50/p99/max while the flood drains, the flood's drain time, and
            lost counts; `--fairness fifo` runs the same with due-order (no tenant fairness),
            for the ratio. Each tenant runs at most half a worker's slots (the default cap)
            unless `--tenant-max-running` says otherwise (0: no cap, as before the default).
recovery:   M jobs with a 5 s in-process handler spread over two workers; one worker is killed
            with SIGKILL 1 s into the runs. Measures the time from the kill until every
            execution has succeeded (lease expiry + reaper grace + redelivery + the 5 s run),
            and how many were redelivered.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import Consumer, TopicPartition

from bench.backlog import BacklogSampler
from bench.cpu import cpu_per_execution_us
from bench.pyspy import Sampler
from bench.scheduler import RESULTS, load, percentiles, wait_ingested
from bench.stack import Stack, add_batches_flag
from bench.visible import Watcher
from kadence.codec import Codec
from kadence.models import (
    ExecutionOutcome,
    HandlerTarget,
    KafkaTarget,
    OnceSchedule,
    OutcomeStatus,
    ScheduleDefinition,
    entries_of,
)
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.worker.fairness import default_max_running

HANDLERS = "bench.handlers"


def reader(settings: KadenceSettings, topic: str) -> Consumer:
    """A consumer of every partition of one of the jobs' topics, from its start, committed
    records only, in a group of its own."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(settings.partitions)])
    return consumer


PENDING_MAX_BYTES = 2**30
"""Outcome records `succeeded` keeps undecoded at most (then it decodes them, quiet or not)."""


def succeeded(
    settings: KadenceSettings,
    expect: int,
    timeout_s: float,
    stall_s: float | None = None,
    *,
    hold_until: float | None = None,
) -> list[ExecutionOutcome]:
    """Every succeeded outcome, waiting up to `timeout_s` for `expect` distinct executions, or
    until no success came for `stall_s` (past the knee some runs are skipped with a reason,
    and no success will come for them). One consumer reads the outcomes as they come
    (re-reading the topic on every poll would take the CPU the workers are being measured on);
    `collect` says when they are decoded."""
    consumer = reader(settings, Topics(settings).outcomes)
    try:
        return collect(consumer, Codec(), expect, timeout_s, stall_s, hold_until=hold_until)
    finally:
        consumer.close()


class Reading(Protocol):
    def consume(self, num_messages: int, timeout: float) -> list[Any]: ...


def collect(
    consumer: Reading,
    codec: Codec,
    expect: int,
    timeout_s: float,
    stall_s: float | None = None,
    *,
    quiet_s: float = 0.5,
    pending_max_bytes: int = PENDING_MAX_BYTES,
    late_s: float = 2.0,
    hold_until: float | None = None,
) -> list[ExecutionOutcome]:
    """The succeeded outcomes `consumer` reads (see `succeeded`). Records are kept as bytes
    while they come and decoded once the topic is quiet for `quiet_s` (or `pending_max_bytes`
    wait): decoding each as it came took a third to a half of a core of the same two cores
    during a burst (measured per process every 0.1 s), CPU the stack's processes lost while
    they were being measured. The runs' times are in the outcomes, so when they are decoded
    changes no figure. Then `late_s` more for late duplicates. `hold_until` (an instant, as
    `time.time()`): nothing is decoded before it, quiet or not, unless `pending_max_bytes`
    wait (B2's outcomes come as a few large records a second, with pauses of 0.5 s between
    them, and its window is measured to its end)."""
    deadline = time.monotonic() + timeout_s
    out: list[ExecutionOutcome] = []
    ids: set[str] = set()
    pending: list[tuple[float, bytes]] = []  # (when it was read, the record)
    pending_bytes = records = 0
    last_print = progress = time.monotonic()

    def decode() -> None:
        nonlocal pending_bytes, progress
        for read_at, value in pending:
            for o in entries_of(codec.decode(value)):
                if isinstance(o, ExecutionOutcome) and o.status is OutcomeStatus.succeeded:
                    out.append(o)
                    ids.add(o.execution_id)
                    progress = max(progress, read_at)
        pending.clear()
        pending_bytes = 0

    while len(ids) < expect and time.monotonic() < deadline:
        held = hold_until is not None and time.time() < hold_until
        if stall_s is not None and not held and time.monotonic() - progress > stall_s:
            decode()  # a success may be waiting undecoded
            if time.monotonic() - progress > stall_s:
                print(f"\n  no success for {stall_s:.0f} s: stopped waiting")
                break
        got = consumer.consume(num_messages=5_000, timeout=quiet_s)
        now = time.monotonic()
        for m in got:
            value = m.value() if m.error() is None else None
            if value:
                pending.append((now, value))
                pending_bytes += len(value)
                records += 1
        if pending and ((not got and not held) or pending_bytes >= pending_max_bytes):
            decode()
        if now - last_print > 2:
            print(f"\r  {records} outcome records read, {len(ids)} of {expect} succeeded", end="")
            last_print = now
    time.sleep(late_s)  # late duplicates
    for m in consumer.consume(num_messages=100_000, timeout=late_s):
        if m.error() is None and m.value():
            pending.append((time.monotonic(), m.value()))
    decode()
    print(f"\r  {len(ids)} of {expect} succeeded", flush=True)
    return out


def jobs(
    n: int, due: datetime, target: Callable[[int], Any], **kw: Any
) -> list[ScheduleDefinition]:
    return [
        ScheduleDefinition(
            tenant=f"tenant-{i % 50}",
            job_id=f"job-{i}",
            version=1,
            schedule=OnceSchedule(run_at=due),
            target=target(i),
            **kw,
        )
        for i in range(n)
    ]


def throughput(
    settings: KadenceSettings,
    root: Path,
    n: int,
    workers: int,
    lead_s: int,
    *,
    profile: bool,
    backlog: bool = False,
) -> dict[str, Any]:
    stack = Stack(settings, root, workers, worker_metrics=backlog).start()
    sampler = None
    signal = None
    try:
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead_s)
        print(f"throughput: {n} jobs with the Kafka topic target due at {due.isoformat()}")
        rate = load(settings, iter(jobs(n, due, lambda _i: KafkaTarget(topic="out"))))
        wait_ingested(settings, timeout_s=300)
        until_due = (
            (due - datetime.now(UTC)).total_seconds() - settings.dispatch_ahead_ms / 1000 - 1
        )
        if until_due > 0:  # the CPU window starts before the scheduler dispatches ahead
            time.sleep(until_due)
        cpu_before = stack.cpu_s()
        if profile:
            sampler = Sampler(root / "profile", stack.pids()).start()
        watcher = Watcher(settings, "out").start()
        if backlog:
            ports = [w.listening("metrics") for w in stack.workers]
            signal = BacklogSampler(ports).start()
        got = succeeded(
            settings, n, timeout_s=max(120, (due - datetime.now(UTC)).total_seconds() + n / 200)
        )
        cpu_after = stack.cpu_s()
        watcher.stop()
        profiled = sampler.stop(len({o.execution_id for o in got})) if sampler else None
        if signal is not None:
            time.sleep(6)  # the lag is measured every 5 s: let the last sample read it
            signal.stop()
    finally:
        stack.stop()
    ids = [o.execution_id for o in got]
    first: dict[str, ExecutionOutcome] = {}
    for o in got:
        first.setdefault(o.execution_id, o)
    ends = [o.finished_at for o in first.values()]
    span = (max(ends) - due).total_seconds() if ends else float("nan")
    lateness = [(o.started_at - o.due_at).total_seconds() for o in first.values()]
    return {
        "jobs": n,
        "workers": workers,
        "worker_concurrency": settings.worker_concurrency,
        "execution_batches": settings.execution_batches,
        "load_defs_per_s": round(rate),
        "executions_per_s": round(len(first) / span, 1) if span > 0 else None,
        "last_outcome_after_due_s": round(span, 2),
        "start_lateness_s": percentiles(lateness),
        "visible_lateness_s": percentiles(watcher.lateness()),
        "duplicated_records": watcher.duplicates,
        "early": sum(1 for x in lateness if x < 0),
        "lost": n - len(first),
        "duplicated_outcomes": len(ids) - len(first),
        "cpu_us_per_execution": cpu_per_execution_us(cpu_before, cpu_after, len(first)),
        "by_worker": by_worker(first.values()),
        **({"py_spy": profiled} if profiled else {}),
        **(signal.summary(due.timestamp()) if signal is not None else {}),
    }


def by_worker(outcomes: Iterable[ExecutionOutcome]) -> dict[str, dict[str, Any]]:
    """Each worker's runs and their start lateness: a burst lasts as long as the worker with
    the most of it (executions partitions are keyed by tenant, and tenants hash unevenly)."""
    late: dict[str, list[float]] = {}
    for o in outcomes:
        late.setdefault(o.worker_id, []).append((o.started_at - o.due_at).total_seconds())
    return {
        worker: {"runs": len(values), "start_lateness_s": percentiles(values)}
        for worker, values in sorted(late.items())
    }


def noisy(
    settings: KadenceSettings, root: Path, flood: int, *, small: int, each: int, lead_s: int
) -> dict[str, Any]:
    stack = Stack(settings, root, workers=2).start()
    try:
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead_s)
        print(
            f"noisy: tenant 'flood' {flood} jobs + {small} tenants x {each} jobs, all due at "
            f"{due.isoformat()} (worker fairness: {settings.worker_fairness})"
        )

        def defs() -> Iterator[ScheduleDefinition]:
            # runs that hold a slot (a thread): a Kafka topic run takes none, so a flood of
            # those claimed ahead starts at T all at once and there is no queue to be fair in
            target = HandlerTarget(name="noop")
            for i in range(flood):  # the flood first: its records sit ahead on its partition
                yield ScheduleDefinition(
                    tenant="flood",
                    job_id=f"f-{i}",
                    version=1,
                    schedule=OnceSchedule(run_at=due),
                    target=target,
                )
            for t in range(small):
                for i in range(each):
                    yield ScheduleDefinition(
                        tenant=f"small-{t:02d}",
                        job_id=f"s-{i}",
                        version=1,
                        schedule=OnceSchedule(run_at=due),
                        target=target,
                    )

        load(settings, defs())
        wait_ingested(settings, timeout_s=300)
        total = flood + small * each
        got = succeeded(
            settings,
            total,
            timeout_s=max(120, (due - datetime.now(UTC)).total_seconds() + total / 150),
        )
    finally:
        stack.stop()
    first: dict[str, ExecutionOutcome] = {}
    for o in got:
        first.setdefault(o.execution_id, o)
    small_late = [
        (o.started_at - o.due_at).total_seconds() for o in first.values() if o.tenant != "flood"
    ]
    flood_done = [o.finished_at for o in first.values() if o.tenant == "flood"]
    timeline: dict[str, list[int]] = {"small": [0] * 20, "flood": [0] * 20}
    for o in first.values():
        slot = int((o.started_at - o.due_at).total_seconds() * 2)
        if 0 <= slot < 20:
            timeline["small" if o.tenant != "flood" else "flood"][slot] += 1
    small_done = [o.finished_at for o in first.values() if o.tenant != "flood"]
    return {
        "flood_jobs": flood,
        "small_tenants": small,
        "jobs_per_small_tenant": each,
        "fairness": settings.worker_fairness,
        "dispatch_order": "tenant turns",
        "workers": 2,
        "worker_concurrency": settings.worker_concurrency,
        "tenant_max_running": default_max_running(settings),
        "small_start_lateness_s": percentiles(small_late),
        "small_all_done_after_due_s": round((max(small_done) - due).total_seconds(), 2)
        if small_done
        else None,
        "flood_drain_after_due_s": round((max(flood_done) - due).total_seconds(), 2)
        if flood_done
        else None,
        "lost": total - len(first),
        "starts_per_half_second_after_due": timeline,
    }


def recovery(settings: KadenceSettings, root: Path, m: int) -> dict[str, Any]:
    stack = Stack(settings, root, workers=2).start()
    try:
        due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=20)
        defs = jobs(
            m, due, lambda _i: HandlerTarget(name="sleep"), payload=b"5", lease_ttl_ms=6_000
        )
        print(f"recovery: {m} jobs of 5 s due at {due.isoformat()}; SIGKILL a worker 1 s in")
        load(settings, iter(defs))
        time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()) + 1)
        killed_at = datetime.now(UTC)
        stack.workers[0].signal(signal.SIGKILL)
        got = succeeded(settings, m, timeout_s=180)
    finally:
        stack.stop()
    first: dict[str, ExecutionOutcome] = {}
    for o in got:
        first.setdefault(o.execution_id, o)
    redelivered = [o for o in first.values() if o.delivery > 1]
    done = max(o.finished_at for o in first.values())
    return {
        "jobs": m,
        "lease_ttl_s": 6,
        "run_s": 5,
        "redelivered": len(redelivered),
        "kill_to_all_succeeded_s": round((done - killed_at).total_seconds(), 2),
        "kill_to_first_redelivered_start_s": round(
            min((o.started_at - killed_at).total_seconds() for o in redelivered), 2
        )
        if redelivered
        else None,
        "lost": m - len(first),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["throughput", "recovery", "noisy"])
    parser.add_argument("--small", type=int, default=50, help="noisy: small tenants")
    parser.add_argument("--each", type=int, default=20, help="noisy: jobs per small tenant")
    parser.add_argument("--fairness", choices=["drr", "fifo"], default="drr")
    parser.add_argument(
        "--tenant-max-running",
        type=int,
        default=None,
        help="runs of one tenant per worker at most (default: half the slots; 0: no cap)",
    )
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--profile", action="store_true", help="throughput: sample with py-spy")
    parser.add_argument(
        "--backlog", action="store_true", help="throughput: sample the workers' backlog metric"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--lead", type=int, default=60, help="throughput: seconds from start to T")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--keep-logs", action="store_true", help="leave the processes' logs (the path is printed)"
    )
    add_batches_flag(parser)
    args = parser.parse_args(argv)
    settings = KadenceSettings(
        bootstrap_servers=args.bootstrap,
        namespace=f"bench-{uuid.uuid4().hex[:8]}",
        worker_concurrency=args.concurrency,
        worker_fairness=args.fairness,
        worker_tenant_max_running=args.tenant_max_running,
        handler_modules=[HANDLERS],
        execution_batches=args.batches,
    )
    provision(settings)
    root = Path(tempfile.mkdtemp(prefix="kadence-bench-exec-"))
    try:
        if args.mode == "throughput":
            result = throughput(
                settings,
                root,
                args.jobs,
                args.workers,
                args.lead,
                profile=args.profile,
                backlog=args.backlog,
            )
        elif args.mode == "noisy":
            result = noisy(
                settings, root, args.jobs, small=args.small, each=args.each, lead_s=args.lead
            )
        else:
            result = recovery(settings, root, args.jobs)
    finally:
        delete_namespace(settings)
        if args.keep_logs:
            print(f"the processes' logs: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    args.results.mkdir(parents=True, exist_ok=True)
    noisy_name = f"-{args.fairness}-c{args.concurrency}"
    if args.tenant_max_running is not None:
        noisy_name += f"-cap{args.tenant_max_running}"
    name = f"execution-{args.mode}" + (noisy_name if args.mode == "noisy" else "")
    (args.results / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
