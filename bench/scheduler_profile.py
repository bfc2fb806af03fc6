"""The scheduler's Python cost per execution, in process, no broker.

    python -m bench.scheduler_profile --jobs 10000 [--store rocksdb] [--profile 25]
    python -m bench.scheduler_profile --shape cron --jobs 1000 --seconds 60


Loads N one-off jobs due at the same second into a task (memory store or RocksDB), then times
what the scheduler does per execution: firing them (each an ExecutionRequested and a `fired`
history record, encoded; a one-off fires alone, so one record each) and processing their N
`succeeded` outcomes (no history record: the outcome is the record), as the runtime runs them
(units of work, the changelog records at commit, the batch applied to the store). What a real
process adds (librdkafka, the consumer and producer) is not in it. Prints µs per execution
(fire + outcome), each phase's share, and with --profile the top functions of a cProfile run
by cumulative and by own time.

`--shape cron` is B2's steady state instead: N per-second cron jobs (overlap allowed,
dispatched 30 s ahead as by default), each second of due time fired and its outcomes settled
the second after; the first 35 s (the look-ahead filling) are not counted, so `--seconds` must
be more (65: 30 s counted, two look-ahead refills). `--target kafka`: the jobs write to a Kafka
topic, so each second's runs of a tenant go out as one ExecutionBatch (as B2's, by default).

Python's cyclic collector runs as in the processes (apps/processes.py `tune_gc`: start-up frozen,
collections far apart) since 2026-12-06; before, a collection every 700 allocations was charged
to whichever line allocated (figures from before are not comparable). Since 2026-12-07 the
process's keeper runs too (apps/gc_keeper.py: what lives on frozen every 25 ms; its thread's
CPU is in the process time counted): without it the young collections walked every job state
and entry the benchmark kept, 6-8 µs of the firing's 34-37 µs an execution, a cost the
processes do not pay (the figures before are higher by that much).

`--shape ingest` is B5's load: N new daily cron definitions (`bench.scheduler`'s) admitted into
a RocksDB task and committed every 2 000, as the runtime does; prints µs per definition.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import tempfile
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from apps.gc_keeper import SWEEP_EVERY_S, keeping
from apps.processes import tune_gc
from bench.scheduler import daily_jobs
from kadence.batches import executions_in
from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import (
    MAX_OUTCOMES_PER_RECORD,
    CronSchedule,
    ExecutionOutcomes,
    ExecutionRequested,
    HandlerTarget,
    KafkaTarget,
    OverlapPolicy,
    ScheduleDefinition,
)
from kadence.models.targets import Target
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.replays import Replays
from streams.runtime.store import MemoryStore, RocksStore, Store
from streams.runtime.task import Task
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor
from testkit.outcomes import outcome_of

T0 = int(datetime(2026, 12, 1, 8, 0, tzinfo=UTC).timestamp() * 1000)
WRITE_BEHIND_MS = KadenceSettings.model_fields["write_behind_ms"].default
DUE = T0 + 1_000


class Bench:
    def __init__(
        self,
        jobs: int,
        store: Store,
        ahead_ms: int = 0,
        write_behind_ms: int = WRITE_BEHIND_MS,
        target: Target | None = None,
    ) -> None:
        self.codec = Codec()
        settings = KadenceSettings(partitions=1)
        self.topics = Topics(settings)
        cfg = SchedulerConfig(
            self.topics,
            1,
            settings.execution_partitions,
            "2025b",
            dispatch_ahead_ms=ahead_ms,
            write_behind=write_behind_ms > 0,
            execution_batches=settings.execution_batches,
        )
        self.target: Target = target or HandlerTarget(name="noop")
        """The cron jobs' target: a Kafka topic's runs go out in batches (the bench turns them
        on, as B2 does with `--batches`)."""
        self.proc = SchedulerProcessor(cfg, self.codec)
        self.task = Task(0, store, T0, 60_000)
        self.task.coalescer = self.proc.coalescer(self.task.record_limit)  # as the runner does
        topics = (self.topics.outcomes,) if write_behind_ms else ()
        self.task.replay_topics = topics
        self.replays = Replays(
            topics, write_behind_ms, self.proc
        )  # the runner's part: writes what waited
        self.task.changelog = self.topics.scheduler_changelog
        self.out: list[tuple[Any, ...]] = []
        self.task._emit = lambda *record: self.out.append(record)
        self.task.prefetch = lambda key: self.proc.prefetch(self.task, key)  # as the runner does
        self.jobs = jobs
        self.offset = 0

    def _process(self, topic: str, key: bytes | None, value: bytes, now: int) -> None:
        """One input record as the runtime takes it: split into its units (a batch of
        outcomes is one unit per outcome), all of them attempted as one unit, or each on its
        own should that fail."""
        record = InputRecord(topic, 0, self.offset, key, value, [], now)
        self.offset += 1
        units = self.proc.split(record)
        if len(units) > 1 and self.task.attempt(
            partial(self.proc.process_together, self.task, units, now), lambda _exc: None
        ):
            return
        for unit in units:
            self.task.attempt(
                partial(self.proc.process, self.task, unit, now),
                partial(self.proc.refuse, self.task, unit, now_ms=now),
            )

    def commit(self, now: int = T0) -> list[bytes]:
        """Commit as the runner does; the executions records written (batches are written
        at the commit)."""
        self.replays.write_due({0: self.task}, now)
        self.task.changelog_records()
        out = [value for topic, _p, _k, value, _h in self.out if topic == self.topics.executions]
        self.task.committed(self.offset)
        self.out.clear()
        return out

    def define(self) -> None:
        for i in range(self.jobs):
            d = ScheduleDefinition(
                tenant=f"t{i % 50}",
                job_id=f"job-{i}",
                version=1,
                schedule={"kind": "once", "run_at": ms_to_datetime(DUE)},
                target=HandlerTarget(name="noop"),
            )
            self._process(self.topics.schedules, d.key.encode(), self.codec.encode(d), T0)
        self.commit()  # the fire phase loads the window: decoding ahead is counted there

    def fire(self) -> list[bytes]:
        out = self.fire_until(DUE)
        assert len(out) == self.jobs, (len(out), self.jobs)
        return out

    def outcomes(
        self, values: list[bytes], batch: int = 1
    ) -> tuple[list[ExecutionRequested], list[bytes]]:
        """The runs among `values` and their `succeeded` outcomes as the workers write them:
        one record each (`batch` 1), or `batch` outcomes a record (ExecutionOutcomes, keyless,
        as a worker's transaction tells a scheduler partition)."""
        runs = [r for v in values for r in executions_in(self.codec, self.codec.decode(v))]
        if batch <= 1:
            return runs, [self.codec.encode(outcome_of(ex)) for ex in runs]
        told = [outcome_of(ex) for ex in runs]
        records = [
            self.codec.encode(ExecutionOutcomes(outcomes=told[i : i + batch]))
            for i in range(0, len(told), batch)
        ]
        return runs, records

    def define_cron(self) -> None:
        for i in range(self.jobs):
            d = ScheduleDefinition(
                tenant=f"t{i % 50}",
                job_id=f"job-{i}",
                version=1,
                schedule=CronSchedule(expression="* * * * * *"),
                target=self.target,
                overlap=OverlapPolicy.allow,
            )
            self._process(self.topics.schedules, d.key.encode(), self.codec.encode(d), T0)
        self.commit()

    def fire_until(self, now: int) -> list[bytes]:
        """Fire what is due at `now`; the executions written."""
        task = self.task
        while keys := task.due(now, 5_000):
            for key in keys:
                task.attempt(
                    partial(self.proc.fire, task, key, now),
                    partial(self.proc.quarantine, task, key, now_ms=now),
                )
        return self.commit(now)

    def settle(
        self,
        runs: list[ExecutionRequested],
        outcomes: list[bytes],
        now: int = DUE + 50,
        batched: bool = False,
    ) -> None:
        if batched:  # keyless records of several outcomes each
            for value in outcomes:
                self._process(self.topics.outcomes, None, value, now)
        else:
            for ex, value in zip(runs, outcomes, strict=True):
                key = f"{ex.tenant}/{ex.job_id}".encode()
                self._process(self.topics.outcomes, key, value, now)
        self.commit(now)


def run(jobs: int, store_kind: str, profiler: cProfile.Profile | None) -> tuple[float, float]:
    """One run: CPU µs per execution of firing and of settling the outcomes."""
    with tempfile.TemporaryDirectory() as tmp:
        store: Store = RocksStore(Path(tmp) / "0") if store_kind == "rocksdb" else MemoryStore()
        bench = Bench(jobs, store)
        bench.define()
        started = time.process_time()
        if profiler:
            profiler.enable()
        sent = bench.fire()
        fired = time.process_time()
        if profiler:
            profiler.disable()
        runs, outcomes = bench.outcomes(sent)  # the workers' part: not counted
        settling = time.process_time()
        if profiler:
            profiler.enable()
        bench.settle(runs, outcomes)
        if profiler:
            profiler.disable()
        done = time.process_time()
        store.close()
    return (fired - started) / jobs * 1e6, (done - settling) / jobs * 1e6


WARM_UP_S = 35
"""`--shape cron`: seconds not counted while the look-ahead fills."""
TARGETS: dict[str, Target] = {
    "handler": HandlerTarget(name="noop"),
    "kafka": KafkaTarget(topic="out"),
}
"""`--target`: what the cron jobs call."""


def run_cron(
    jobs: int,
    seconds: int,
    profiler: cProfile.Profile | None,
    write_behind_ms: int,
    *,
    batch: int = 1,
    target: Target | None = None,
) -> tuple[float, int, float]:
    """B2's steady state: CPU µs per execution (fire and outcome) after the look-ahead filled,
    how many executions were counted, and the µs of that spent firing. A second's outcomes
    come one record each (`batch` 1) or `batch` to a record, as the workers write them."""
    bench = Bench(
        jobs, MemoryStore(), ahead_ms=30_000, write_behind_ms=write_behind_ms, target=target
    )
    bench.define_cron()
    pending: dict[int, list[bytes]] = {}
    """The executions sent, by due instant."""
    counted, cpu, firing = 0, 0.0, 0.0
    for second in range(seconds):
        now = T0 + 1_000 * (second + 1)
        measured = second >= WARM_UP_S
        ready = [
            bench.outcomes(pending.pop(due), batch) for due in sorted(pending) if due <= now - 1_000
        ]
        started = time.process_time()  # the workers' part, above, is not counted
        if measured and profiler:
            profiler.enable()
        sent = bench.fire_until(now)
        fired = time.process_time()
        for runs, outcomes in ready:
            bench.settle(runs, outcomes, now, batched=batch > 1)
            counted += len(runs) if measured else 0
        if measured and profiler:
            profiler.disable()
        cpu += time.process_time() - started if measured else 0.0
        firing += fired - started if measured else 0.0
        for value in sent:  # an execution, or a batch of executions due at one instant
            for ex in executions_in(bench.codec, bench.codec.decode(value))[:1]:
                pending.setdefault(int(ex.due_at.timestamp() * 1000), []).append(value)
    return cpu / max(1, counted) * 1e6, counted, firing / max(1, counted) * 1e6


def run_ingest(jobs: int, profiler: cProfile.Profile | None) -> float:
    """CPU µs per new definition: decoded, admitted, its state written and committed."""
    with tempfile.TemporaryDirectory() as tmp:
        store = RocksStore(Path(tmp) / "0")
        bench = Bench(jobs, store)
        encoded = [(d.key.encode(), bench.codec.encode(d)) for d in daily_jobs(jobs)]
        started = time.process_time()
        if profiler:
            profiler.enable()
        for i, (key, value) in enumerate(encoded, 1):
            bench._process(bench.topics.schedules, key, value, T0)
            if i % 2_000 == 0:
                bench.commit()
        bench.commit()
        if profiler:
            profiler.disable()
        spent = time.process_time() - started
        store.close()
    return spent / jobs * 1e6


def _print_profile(profiler: cProfile.Profile, top: int) -> None:
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).sort_stats(order)
        stats.print_stats(top)
        if os.environ.get("KADENCE_PROFILE_CALLERS"):
            stats.print_callers(os.environ["KADENCE_PROFILE_CALLERS"])
            stats.print_callees(os.environ["KADENCE_PROFILE_CALLERS"])
        print(text.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--store", choices=["memory", "rocksdb"], default="memory")
    parser.add_argument("--repeat", type=int, default=3, help="report the best of this many")
    parser.add_argument("--profile", type=int, default=0, help="print the top N functions")
    parser.add_argument("--shape", choices=["burst", "cron", "ingest"], default="burst")
    parser.add_argument("--seconds", type=int, default=60, help="cron: seconds of due time")
    parser.add_argument(
        "--write-behind-ms",
        type=int,
        default=WRITE_BEHIND_MS,
        help="cron: the scheduler's write_behind_ms (0: every outcome written, as before)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="cron: outcomes a record (ExecutionOutcomes, as workers write them; 1: one each)",
    )
    parser.add_argument(
        "--target",
        choices=sorted(TARGETS),
        default="handler",
        help="cron: the jobs' target (kafka: a tenant's runs of a second in one ExecutionBatch)",
    )
    args = parser.parse_args()
    tune_gc()
    with keeping(SWEEP_EVERY_S):  # as the processes run (apps/processes.py)
        _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.shape == "ingest":
        us = min(run_ingest(args.jobs, None) for _ in range(args.repeat))
        print(f"{args.jobs} new daily definitions, best of {args.repeat}: {us:.1f} µs CPU each")
        if args.profile:
            profiler = cProfile.Profile()
            run_ingest(args.jobs, profiler)
            _print_profile(profiler, args.profile)
        return
    if not 1 <= args.batch <= MAX_OUTCOMES_PER_RECORD:
        parser.error(f"--batch: 1 to {MAX_OUTCOMES_PER_RECORD} outcomes a record")
    if args.shape == "cron":
        if args.seconds <= WARM_UP_S:
            parser.error(
                f"--shape cron counts the seconds after the first {WARM_UP_S}: --seconds "
                f"must be more (65 counts 30 s, two look-ahead refills)"
            )
        behind = args.write_behind_ms
        cron = partial(
            run_cron,
            args.jobs,
            args.seconds,
            write_behind_ms=behind,
            batch=args.batch,
            target=TARGETS[args.target],
        )
        best = min(cron(None) for _ in range(args.repeat))
        print(
            f"{args.jobs} per-second jobs, {best[1]} executions counted, best of "
            f"{args.repeat}: {best[0]:.0f} µs CPU per execution (fire {best[2]:.0f}, outcome "
            f"{best[0] - best[2]:.0f}; write_behind_ms={behind}, {args.batch} outcomes a record)"
        )
        if args.profile:
            profiler = cProfile.Profile()
            cron(profiler)
            _print_profile(profiler, args.profile)
        return
    fire_us, outcome_us = min(
        (run(args.jobs, args.store, None) for _ in range(args.repeat)), key=sum
    )
    print(
        f"{args.jobs} executions on {args.store}, best of {args.repeat}: "
        f"{fire_us + outcome_us:.0f} µs CPU per execution "
        f"(fire {fire_us:.0f}, outcome {outcome_us:.0f})"
    )
    if args.profile:
        profiler = cProfile.Profile()
        run(args.jobs, args.store, profiler)
        _print_profile(profiler, args.profile)


if __name__ == "__main__":
    main()
