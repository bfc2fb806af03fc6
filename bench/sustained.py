"""B2 sustained load: open-loop rates up to the knee.

    python -m bench.sustained [--rates 100,200,400,600] [--seconds 60]   (make bench-sustained)

    python -m bench.sustained --target handler|http   (in-process no-op handler; loopback HTTP)

    python -m bench.sustained --rates 2000 --seconds 180 --no-volume   (without counting the
    records and bytes written per execution by topic, which every run does by default)

    python -m bench.sustained --rates 5000 --seconds 180 --profile   (py-spy, each process)

    python -m bench.sustained --rates 8000 --no-batches   (KADENCE_EXECUTION_BATCHES=false)
    python -m bench.sustained --rates 14000 --stagger 15   (the jobs made over 15 s, not at once)
    python -m bench.sustained --rates 10000 --inbox 250000 --keep-logs   (each worker's inbox
    bound; the processes' logs left)

For each rate R, a fresh stack (scheduler, reaper, two workers x 64, Kafka topic target) runs R
jobs that each fire every second (`* * * * * *`, overlap allowed) for `--seconds` s: R
executions per second whether or not the workers keep up (open loop: the schedule does not wait
for the previous run). The jobs go on for the scheduler's look-ahead (30 s) after the window, so
what is due in the window is dispatched as in a steady state; those last runs are waited for but
their lateness is not judged (`tail_s`). Per rate: start lateness p50/p99/max over the whole
window and p99 per third, the completed rate, and lag growth (p99 in the last third minus p99 in
the third after a 20 s warm-up). The knee is the highest rate whose p99 after the warm-up is
under 1 s with no lag growth (under 0.5 s) and every run started, the tail's too. A run that did
not start was either skipped late by the jobs' missed-run policy (`skipped_late`, in the window
or the tail: a scheduler that fell behind noticed it past the 30 s grace and coalesced it into a
later run, as history says: bench/misfire_skips.py) or is `lost` (neither ran nor was skipped);
either fails the rate (since 2026-12-07: before, a run of the tail skipped late did not). Each
rate ends with one line (bench/headline.py): on time or not, the CPU per execution by process,
the same by kind of work in each process (`cpu_us_per_execution_by_work`: what each loop charged
to `kadence_work_cpu_seconds_total{work}` between the same two instants, kadence/work_cpu.py,
then the process's other threads) and the records per execution by topic. The runs visible later
than 1 s are counted by job partition and executions partition (`visible_late_by_partition`):
one partition is a stalled partition (a scheduler's, or a worker's that stopped reading with its
inbox full: `--keep-logs` shows it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apps.gc_keeper import MAX_SWEEP_S, keeping
from apps.processes import ChildProcess
from bench import lost_runs, misfire_skips, topic_volume
from bench.cpu import cpu_per_execution_us, pid_cpu_seconds, work_per_execution_us
from bench.execution import HANDLERS, succeeded
from bench.headline import headline
from bench.http_sink import summary_of
from bench.pyspy import Sampler
from bench.scheduler import RESULTS, load, percentiles
from bench.stack import Stack, add_batches_flag
from bench.topic_volume import per_execution
from bench.visible import Watcher
from kadence.client import routing_key
from kadence.models import (
    CronSchedule,
    HandlerTarget,
    HttpTarget,
    KafkaTarget,
    OverlapPolicy,
    ScheduleDefinition,
)
from kadence.models.targets import Target
from kadence.partitioning import execution_route, partition_for
from kadence.provisioning import delete_namespace, provision
from kadence.settings import KadenceSettings
from kadence.topics import Topics

ON_TIME_S = 1.0
GROWTH_S = 0.5
WARM_UP_S = 20
"""The first seconds of each rate are reported but not judged (at most a third of the window):
every job starts at once, so the look-ahead puts 30 s of executions on the topic in the first
seconds, and every tenant's first run creates its target topic."""


def one_rate(
    base: KadenceSettings,
    rate: int,
    seconds: int,
    target: Target,
    workers: int = 2,
    *,
    volume: bool = False,
    schedulers: int = 1,
    profile: bool = False,
    keep: bool = False,
    stagger: int = 0,
) -> dict[str, Any]:
    """One rate on a fresh stack and namespace; `volume`: also count what it wrote to Kafka,
    records and bytes per execution by topic (bench/topic_volume.py), before the namespace
    goes; `keep`: leave the processes' logs."""
    settings = base.model_copy(update={"namespace": f"bench-{uuid.uuid4().hex[:8]}"})
    provision(settings)
    root = Path(tempfile.mkdtemp(prefix="kadence-bench-sustained-"))
    stack = Stack(settings, root, workers=workers, schedulers=schedulers, metrics=True).start()
    watcher: Watcher | None = None
    try:
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=10 + stagger)
        end = start + timedelta(seconds=seconds - 1)
        tail = tail_seconds(settings)
        defs = [
            ScheduleDefinition(
                tenant=f"tenant-{i % 20}",
                job_id=f"every-second-{i}",
                version=1,
                schedule=CronSchedule(
                    expression="* * * * * *",
                    start_at=start,
                    end_at=end + timedelta(seconds=tail),
                ),
                target=target,
                overlap=OverlapPolicy.allow,
            )
            for i in range(rate)
        ]
        print(
            f"sustained: {rate}/s for {seconds} s from {start.isoformat()}"
            f" (and {tail} s more, dispatched ahead within the window)"
        )
        load_staggered(settings, defs, stagger)
        expect_all = rate * (seconds + tail)
        watcher = Watcher(settings, "out").start() if isinstance(target, KafkaTarget) else None
        warm_up = min(WARM_UP_S, seconds / 3)
        cpu = SteadyCpu(
            stack,
            start.timestamp() + warm_up,
            end.timestamp() + 1,
            rate=rate,
            profile=root / "profile" if profile else None,
            own={
                "outcome reader": os.getpid(),
                "visible watcher": None if watcher is None else watcher.pid,
            },
        ).start()
        got = succeeded(
            settings,
            expect_all,
            timeout_s=seconds + tail + 10 + max(60, expect_all / 100),
            stall_s=60,
            # decoded once the tail's runs are due too: the tail is judged as the window is
            # (a run it skips late fails the rate), so the reader stays off the cores until then
            hold_until=end.timestamp() + tail + 1,
        )
        if watcher is not None:
            watcher.stop()
        started_all = len({o.execution_id for o in got})
        pauses = stack.inbox_pauses()
        skips = (
            misfire_skips.skips(settings, start.timestamp())
            if started_all < expect_all
            else misfire_skips.Skips(start.timestamp())
        )
        written = topic_volume.volume(settings) if volume else None
        lost_detail = (
            _lost(
                settings,
                got,
                defs,
                first_s=int(start.timestamp()),
                seconds=seconds + tail,
                skips=skips,
            )
            if started_all + skips.total < expect_all
            else {}
        )
    finally:
        if watcher is not None:
            watcher.close()
        stack.stop()
        delete_namespace(settings)
        if keep:
            print(f"the processes' logs: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    start_s = start.timestamp()
    first: dict[str, Any] = {}  # the window's runs: due before start_s + seconds
    for o in got:
        if o.due_at.timestamp() < start_s + seconds:
            first.setdefault(o.execution_id, o)
    runs = [
        (o.due_at.timestamp(), o.started_at.timestamp(), o.finished_at.timestamp())
        for o in first.values()
    ]
    visible: dict[str, Any] = {}
    visible_p99 = None
    if watcher is not None:
        seen = {e: late for e, late in watcher.seen.items() if e in first}
        steady_ids = [
            e for e, o in first.items() if o.due_at.timestamp() - start_s >= warm_up and e in seen
        ]
        visible_p99 = (
            percentiles([seen[e] for e in steady_ids])["p99"] if steady_ids else float("nan")
        )
        visible = {
            "visible_lateness_s": percentiles(list(seen.values())),
            "visible_p99_after_warm_up_s": round(visible_p99, 3),
            "visible_seconds_over_1s": late_seconds(
                {e: (first[e].due_at.timestamp() - start_s, seen[e]) for e in steady_ids}
            ),
            "duplicated_records": watcher.duplicates,
            "visible_late_by_partition": late_by_partition(
                {e: seen[e] for e in steady_ids},
                {e: (o.tenant, o.job_id) for e, o in first.items()},
                settings,
            ),
        }
    row = summarize(
        rate,
        seconds,
        start_s,
        runs,
        also_steady=visible_p99,
        skipped=skips.total,
        unstarted_after=rate * tail - (started_all - len(first)),
    )
    on_time = row.pop("on_time")
    return {
        "rate_per_s": rate,
        "seconds": seconds,
        **row,
        "tail_s": tail,
        **({"skipped_late_detail": d} if (d := skips.as_row()) else {}),
        **({"lost_detail": lost_detail} if lost_detail else {}),  # which, and their history
        "duplicated_outcomes": len(got) - started_all,
        **visible,
        "cpu_us_per_execution": cpu.per_execution_us(),
        "cpu_us_per_execution_by_work": cpu.by_work_us(),
        "bench_cpu_us_per_execution": cpu.own_us(),
        "scheduler_behind_at_end": cpu.behind,
        "scheduler_outcomes_behind_in_window": cpu.behind_in_window(),
        "inbox_full": pauses,
        **({"py_spy": cpu.profiled} if cpu.profiled else {}),
        **(
            {} if written is None else {"written_per_execution": per_execution(written, expect_all)}
        ),
        "on_time": on_time,
    }


MAX_STAGGER_S = 3600


def stagger_seconds(text: str) -> int:
    """`--stagger`'s value: whole seconds from 0 to an hour. A negative value would start the
    window before the jobs are made, in the past."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}") from None
    if not 0 <= value <= MAX_STAGGER_S:
        raise argparse.ArgumentTypeError(f"{value} is not from 0 to {MAX_STAGGER_S} seconds")
    return value


def load_staggered(settings: KadenceSettings, defs: list[ScheduleDefinition], stagger: int) -> None:
    """Write `defs` at once, or (`stagger` > 0) in `stagger` slices a second apart: jobs made
    over that many seconds, as jobs are made over time, not together (each fills its look-ahead
    when it is made: bench.sustained --stagger)."""
    if stagger <= 0:
        load(settings, iter(defs))
        return
    began = time.monotonic()
    for k in range(stagger):
        time.sleep(max(0.0, began + k - time.monotonic()))
        load(settings, iter(defs[k::stagger]))


BEHIND_EVERY_S = 2.0
"""How often the window samples the outcome records the schedulers have yet to read (their
metric is refreshed about as often)."""


def behind_summary(samples: list[int]) -> dict[str, int]:
    """The most and the mean of the samples of outcome records behind ({} without samples)."""
    if not samples:
        return {}
    return {"max": max(samples), "mean": round(sum(samples) / len(samples))}


def _lost(
    settings: KadenceSettings,
    got: list[Any],
    defs: list[ScheduleDefinition],
    *,
    first_s: int,
    seconds: int,
    skips: misfire_skips.Skips,
) -> dict[str, object]:
    """The jobs with runs neither succeeded nor skipped, and a few of their histories
    (bench/lost_runs.py), read before the namespace goes."""
    found = lost_runs.lost_runs(
        ((f"{o.tenant}/{o.job_id}", o.due_at.timestamp()) for o in got),
        (f"{d.tenant}/{d.job_id}" for d in defs),
        range(first_s, first_s + seconds),
        skips.by_job,
    )
    sample = sorted(found.jobs, key=lambda k: (-found.jobs[k], k))[: lost_runs.SAMPLE_JOBS]
    if sample:
        found.history = lost_runs.sample_history(
            settings.bootstrap_servers, Topics(settings).history, sample
        )
    return found.as_row()


def tail_seconds(settings: KadenceSettings) -> int:
    """How long the jobs go on after the measured window: the scheduler's look-ahead. Runs are
    dispatched (fired, written, read by a worker) up to `dispatch_ahead_ms` before they are due,
    so jobs that ended with the window stopped being dispatched that long before its end, and
    the window counted only part of the CPU of firing and reading: over 60 s at 8 000/s the
    scheduler's firing came to 26-28 µs an execution and the workers' reading to 14-15, over
    4 minutes to 54 and 26. The tail's runs are dispatched within the window and waited for,
    not judged."""
    return math.ceil(settings.dispatch_ahead_ms / 1000)


def late_by_partition(
    late: dict[str, float], jobs: dict[str, tuple[str, str]], settings: KadenceSettings
) -> dict[str, dict[int, int]]:
    """How many runs were later than ON_TIME_S (`late`: execution id -> lateness), by the job
    partition of their job (its scheduler's) and by their executions partition (its worker's),
    from `jobs` (execution id -> (tenant, job id)): a stall of one partition shows as one
    partition, a stall of a whole process as all of its."""
    by_job: dict[int, int] = {}
    by_execution: dict[int, int] = {}
    for eid, seconds in late.items():
        if seconds <= ON_TIME_S or eid not in jobs:
            continue
        tenant, job_id = jobs[eid]
        p = partition_for(routing_key(tenant, job_id, None), settings.partitions)
        route = execution_route(tenant, job_id, settings.tenant_shards)
        e = partition_for(route, settings.execution_partitions)
        by_job[p] = by_job.get(p, 0) + 1
        by_execution[e] = by_execution.get(e, 0) + 1
    return {"job": dict(sorted(by_job.items())), "executions": dict(sorted(by_execution.items()))}


def late_seconds(lateness: dict[str, tuple[float, float]]) -> list[list[float]]:
    """[due second from the start, its p99] of each due second whose p99 is over ON_TIME_S,
    from (due offset, lateness) per execution: whether the tail is a few seconds that repeat
    (a periodic stall) or spread over the window."""
    by_second: dict[int, list[float]] = {}
    for offset, late in lateness.values():
        by_second.setdefault(int(offset), []).append(late)
    return [
        [second, round(p99, 2)]
        for second, values in sorted(by_second.items())
        if (p99 := percentiles(values)["p99"]) > ON_TIME_S
    ]


def summarize(
    rate: int,
    seconds: int,
    start_s: float,
    runs: list[tuple[float, float, float]],
    *,
    also_steady: float | None = None,
    skipped: int = 0,
    unstarted_after: int = 0,
) -> dict[str, Any]:
    """The lateness figures and the verdict of one rate, from the first run of each execution
    that started: (due, started, finished) as unix seconds. The window is [start_s, start_s +
    seconds) with `rate` executions due per second; `also_steady`, another p99 after the warm-up
    (a consumer's view) that must be on time too; `skipped`, the runs the missed-run policy
    skipped (never started, on purpose), in the window and after it; `unstarted_after`, the
    runs due after the window (the tail that keeps dispatching ahead steady) that did not start.
    A run skipped late fails the rate wherever it was due: the tail's lateness is not judged,
    but a run of it the missed-run policy gave up on did not happen for its tenant (at 14 000/s
    on 0.19.0 a p99 of 0.55 s in the window came with 640-2 263 of them).
    Peers are judged with it (bench/peers)."""
    expect = rate * seconds
    late = [started - due for due, started, _f in runs]
    third = seconds / 3

    def p99_between(lo: float, hi: float) -> float:
        window = [started - due for due, started, _f in runs if lo <= due - start_s < hi]
        return percentiles(window)["p99"] if window else float("nan")

    thirds = [p99_between(i * third, (i + 1) * third) for i in range(3)]
    warm_up = min(WARM_UP_S, third)
    steady = p99_between(warm_up, seconds)
    if also_steady is not None:
        steady = max(steady, also_steady)
    growth = thirds[2] - p99_between(warm_up, third + warm_up)
    ends = [finished for _d, _s, finished in runs]
    span = (max(ends) - start_s) if ends else float("nan")
    return {
        "expected": expect,
        "start_lateness_s": percentiles(late),
        "early": sum(1 for x in late if x < 0),
        "p99_by_third_s": [round(t, 3) for t in thirds],
        "p99_after_warm_up_s": round(steady, 3),
        "within_1s_pct": round(100 * sum(1 for x in late if x <= ON_TIME_S) / expect, 1),
        "completed_per_s": round(len(runs) / span, 1) if span > 0 else None,
        "p99_growth_s": round(growth, 3),
        "skipped_late": skipped,
        "lost": (lost := expect - len(runs) + unstarted_after - skipped),
        "on_time": steady < ON_TIME_S
        and growth < GROWTH_S
        and len(runs) == expect
        and lost <= 0
        and skipped == 0,
    }


def knee(rows: list[dict[str, Any]]) -> int | None:
    """The highest rate judged on time."""
    return max((r["rate_per_s"] for r in rows if r["on_time"]), default=None)


class SteadyCpu:
    """Each process's CPU (the broker's too) between two instants: the end of the warm-up and
    the end of the load; per execution, that is divided by the executions due in between. The
    loops' CPU by kind of work too, read from their metrics at the same instants."""

    def __init__(
        self,
        stack: Stack,
        from_s: float,
        to_s: float,
        *,
        rate: int,
        profile: Path | None = None,
        own: dict[str, int | None] | None = None,
        behind_every_s: float = BEHIND_EVERY_S,
    ) -> None:
        self.stack, self.from_s, self.to_s, self.rate = stack, from_s, to_s, rate
        self.behind_every_s = behind_every_s
        self.own = {name: pid for name, pid in (own or {}).items() if pid is not None}
        """The benchmark's own processes on the same cores (name -> pid): measured apart, not
        in the stack's total."""
        self.samples: list[dict[str, float]] = []
        self.own_samples: list[dict[str, float]] = []
        self.behind: dict[str, int] = {}
        """What the schedulers had yet to read at the window's end, by topic: work the window
        left for later and did not count (the outcomes, when a scheduler falls behind)."""
        self.behind_samples: list[int] = []
        """The outcome records the schedulers had yet to read, every `behind_every_s` in the
        window (`behind_in_window`)."""
        self.work_samples: list[dict[str, dict[str, float]]] = []
        self.sampler = None if profile is None else Sampler(profile, stack.pids())
        """py-spy over the same window (`--profile`): where each process's Python time goes."""
        self.profiled: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SteadyCpu:
        self._thread.start()
        return self

    def _run(self) -> None:
        for at in (self.from_s, self.to_s):
            while len(self.samples) == 1 and at - time.time() > self.behind_every_s:
                time.sleep(self.behind_every_s)  # the window: how far behind the outcomes are
                self.behind_samples.append(self.stack.schedulers_behind().get("outcomes", 0))
            time.sleep(max(0.0, at - time.time()))
            self.samples.append(self.stack.cpu_s())
            self.own_samples.append({k: pid_cpu_seconds(pid) for k, pid in self.own.items()})
            if len(self.samples) == 2:
                self.behind = self.stack.schedulers_behind()
            self.work_samples.append(self.stack.work_s())
            if self.sampler is not None and len(self.samples) == 1:
                self.sampler.start()
        if self.sampler is not None:
            self.profiled = self.sampler.stop(round(self.rate * (self.to_s - self.from_s)))

    def behind_in_window(self) -> dict[str, int]:
        """How far behind the schedulers' outcomes were in the window, in records: their most
        and their mean over the samples (a run counts as in progress until its outcome is
        read, so a lag that grows takes the tenants to their in-flight cap)."""
        return behind_summary(self.behind_samples)

    def per_execution_us(self) -> dict[str, float | None]:
        self._thread.join(35 if self.sampler is not None else 1)
        if len(self.samples) < 2:
            return {}
        out = cpu_per_execution_us(self.samples[0], self.samples[1], self._executions())
        total = sum(v for v in out.values() if v is not None)
        return {**out, "total": total}

    def own_us(self) -> dict[str, float | None]:
        """The benchmark's own processes' CPU per execution over the same window."""
        if len(self.own_samples) < 2:
            return {}
        before, after = self.own_samples
        return cpu_per_execution_us(before, after, self._executions())

    def by_work_us(self) -> dict[str, dict[str, float]]:
        """{process: {kind of work: µs per execution, ..., "other threads": µs}}."""
        if len(self.work_samples) < 2:
            return {}
        whole = self.per_execution_us()
        before, after = self.work_samples
        return work_per_execution_us(before, after, self._executions(), whole)

    def _executions(self) -> int:
        return round(self.rate * (self.to_s - self.from_s))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench.sustained", description=__doc__)
    parser.add_argument("--rates", default="100,200,400,600")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--schedulers",
        type=int,
        default=1,
        help="scheduler processes (the job partitions split between them)",
    )
    parser.add_argument("--target", choices=("kafka", "handler", "http"), default="kafka")
    parser.add_argument("--bootstrap", default=KadenceSettings().bootstrap_servers)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--volume",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="count the records and bytes written per execution, by topic (default: on)",
    )
    parser.add_argument(
        "--inbox",
        type=int,
        default=None,
        help="each worker's KADENCE_WORKER_INBOX_MAX_EXECUTIONS (default: the setting's). It "
        "must hold the worker's share of what is dispatched ahead (docs/configuration.md): "
        "past it a worker stops reading, and runs due soon wait behind the ones it holds",
    )
    parser.add_argument(
        "--keep-logs",
        action="store_true",
        help="leave each rate's process logs (inbox full, rebalances, aborts) and say where",
    )
    add_batches_flag(parser)
    parser.add_argument(
        "--stagger",
        type=stagger_seconds,
        default=0,
        help="make the jobs over this many seconds, a slice a second (default 0: all at once, "
        "so their look-ahead refills fall together); the window starts after them",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also sample each process with py-spy after the warm-up (needs py-spy)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    base = KadenceSettings(
        bootstrap_servers=args.bootstrap,
        worker_concurrency=args.concurrency,
        handler_modules=[HANDLERS],
        target_allow_cidrs=["127.0.0.1/32"],
        execution_batches=args.batches,
    )
    if args.inbox is not None:
        try:
            base = KadenceSettings.model_validate(
                {**base.model_dump(), "worker_inbox_max_executions": args.inbox}
            )
        except ValueError as exc:
            parser.error(f"--inbox: {exc}")
    sink = None
    target: Target = KafkaTarget(topic="out")
    if args.target == "handler":
        target = HandlerTarget(name="noop")
    elif args.target == "http":
        sink = ChildProcess("bench.http_sink", base).start()
        target = HttpTarget(url=f"http://127.0.0.1:{sink.listening('http sink')}/")
    rows = []
    try:
        for rate in (int(r) for r in args.rates.split(",")):
            started = time.monotonic()
            # The outcome reader keeps every success it read (millions over minutes): frozen
            # as it goes, the collector stops walking them (a full collection took 0.5 s by the
            # end of 60 s at 8 000/s), CPU taken from the stack on the same cores.
            with keeping(MAX_SWEEP_S):
                row = one_rate(
                    base,
                    rate,
                    args.seconds,
                    target,
                    args.workers,
                    volume=args.volume,
                    schedulers=args.schedulers,
                    profile=args.profile,
                    keep=args.keep_logs,
                    stagger=args.stagger,
                )
            row["wall_s"] = round(time.monotonic() - started, 1)
            row["headline"] = headline(row)
            print(json.dumps(row, indent=2))
            print(row["headline"])
            rows.append(row)
    finally:
        if sink is not None:
            sink.stop()
    at_sink = summary_of(sink.output()) if sink is not None else {}
    result = {
        "knee_per_s": knee(rows),
        "target": args.target,
        "workers": args.workers,
        "schedulers": args.schedulers,
        "worker_concurrency": args.concurrency,
        "worker_inbox_max_executions": base.worker_inbox_max_executions,
        "execution_batches": base.execution_batches,
        "rates": rows,
        # what the receiver saw, every rate of this run together (one rate a run to read it
        # per rate): each request's arrival minus its due time, warm-up included
        "received_after_due_s": at_sink.get("lateness_as_received_s"),
        "sink_requests": at_sink.get("requests"),
        "sink_connections": at_sink.get("connections"),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.target == "kafka" else f"-{args.target}"
    (args.results / f"sustained{suffix}.json").write_text(json.dumps(result, indent=2) + "\n")
    at = result["knee_per_s"]
    for row in rows:
        print(row["headline"])
    print(f"knee ({args.target} target): {at}/s (p99 under {ON_TIME_S} s, no lag growth)")
    if result["received_after_due_s"] is not None:
        received = result["received_after_due_s"]
        print(f"received by the sink - due (every rate, warm-up included): {received}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
