"""The worker's CPU per execution on the in-memory driver (no broker): Kafka-topic runs.

    python -m bench.worker_path [--executions 20000] [--tenants 10] [--rounds 3]
                                [--payload 64] [--seconds 0] [--per-turn 0] [--jobs 0]
                                [--profile] [--top 25] [--outcome-record] [--batch N]

Loads `--executions` ExecutionRequested records (Kafka-topic target, exactly once, Avro, a
`--payload`-byte payload, `--tenants` tenants, two executions partitions) into the executions
topic beforehand, then turns one worker until every outcome is committed: each run's tenant
record, its `succeeded` outcome and the consumer offsets in the worker's transactions, as in
production (testkit/driver: the worker is the real loop on memkafka). Due now by default;
`--seconds S`: due over the next S seconds, interleaved in offset order (execution i in second
1 + i % S), all read and prepared before the clock moves, then one second at a time: B2's shape,
where frequent jobs dispatch their look-ahead together and the held offsets are scattered.
`--per-turn K`: the executions are written K before each turn (outside the time measured)
instead of all beforehand, so that turns are as small as a worker's at a steady rate (3 000/s
at a turn every 5-10 ms is 15-30 a turn) and what a turn costs whatever it carries shows.
Prints the process CPU time spent inside `Worker.turn` per execution, per round and the median
(loading the records and counting the outcomes are outside it). The in-memory cluster's own
work (memkafka's produce, read, commit) is inside it: compare two commits with the same
command, not with a broker's figure.
`--batch N`: a tenant's executions of one due instant and partition go out N a record, as
ExecutionBatch records (KADENCE_EXECUTION_BATCHES), instead of a record each.
`--jobs J`: the executions are the runs of J per-second jobs (each job's runs of a 15-second
wake sent out together, as the scheduler sends them; --executions / J seconds of them, a second
at a time), not each a job of its own: B2's shape, where a worker reads a job's runs from the
parts of its earlier ones (kadence/entry_templates.py).
`--profile`: the last round under cProfile, its top functions by cumulative time.
`--outcome-record`: only a delivered run's outcome record, written the generic way (model,
encode, headers, partition) and from the template (streams/worker/outcome_bytes.py),
alternating, `--rounds` times: CPU per record.

Side by side with another commit: run it from a second worktree of that commit, alternating.

Python's cyclic collector runs as in the worker process since 2026-12-07 (apps/processes.py
`tune_gc` and the keeper, apps/gc_keeper.py, whose thread's CPU is in the time counted): before,
a collection every 700 allocations walked every record the benchmark kept and was charged to
whichever line allocated, about half of the figure (61-63 µs against 30-31 for `--executions
20000 --jobs 1000 --tenants 10 --batch 1000`); figures from before are not comparable.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import pstats
import statistics
import time
from datetime import datetime
from typing import Any

from apps.gc_keeper import SWEEP_EVERY_S, keeping
from apps.processes import tune_gc
from connectors.kafka_topic import KafkaTopicCaller
from kadence import avro_fast
from kadence.clock import ms_to_datetime
from kadence.codec import HEADER_LEN, Codec
from kadence.headers import TYPE, Headers, headers_for
from kadence.models import (
    MAX_EXECUTIONS_PER_BATCH,
    ExecutionOutcome,
    ExecutionOutcomes,
    ExecutionRequested,
    KafkaTarget,
)
from kadence.partitioning import partition_for
from kadence.settings import KadenceSettings
from streams.scheduler.batching import ExecutionBatches
from streams.worker.active import ActiveRun
from streams.worker.delivering import NO_STOP
from streams.worker.inbox import Item
from streams.worker.outcome_bytes import DeliveredOutcomes
from streams.worker.records import delivered_outcome
from testkit.driver import START_MS, Driver

MAX_EXECUTIONS = 1_000_000
MAX_PAYLOAD = 100_000
MAX_SECONDS = 600


class _NoClient:
    """Stands for the target's own producer and admin client: the exactly-once path never
    uses them (the worker's transaction writes the tenant's record)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the Kafka target's own client was used ({name})")


def execution(
    i: int, tenants: int, due_ms: int, payload: bytes, jobs: int = 0
) -> ExecutionRequested:
    """Execution `i`: of its own job (`jobs` 0), or of job i % `jobs`, sent out with its job's
    other runs of a 15-second wake (a per-second job's, as the scheduler sends them)."""
    due = ms_to_datetime(due_ms)
    j = i % jobs if jobs else i
    tenant, job = f"tenant-{j % tenants}", f"job-{j}"
    wake_ms = due_ms - (due_ms - START_MS) % 15_000 - 15_000 if jobs else due_ms - 1_000
    return ExecutionRequested(
        execution_id=f"{tenant}/{job}@{due.isoformat()}",
        tenant=tenant,
        job_id=job,
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=ms_to_datetime(wake_ms),
        target=KafkaTarget(topic="orders"),
        payload=payload,
        timeout_ms=30_000,
        lease_ttl_ms=30_000,
    )


class _Round:
    """One worker on a fresh driver, its executions written and its turns timed."""

    def __init__(self, args: argparse.Namespace, profile: cProfile.Profile | None) -> None:
        self.args, self.profile, self.n, self.cpu = args, profile, int(args.executions), 0.0
        self.driver = driver = Driver()
        settings = KadenceSettings(
            namespace="bench", partitions=2, execution_partitions=2, worker_tenant_max_share=1.0
        )
        self.topics = topics = driver.provision(settings)
        self.kafka = kafka = KafkaTopicCaller("127.0.0.1:9", settings.namespace, 1, Codec())
        kafka.producer = kafka.admin = _NoClient()  # type: ignore[assignment]
        payload = b"x" * args.payload
        for t in range(args.tenants):
            ex = execution(t, args.tenants, START_MS, payload)
            kafka._known.add(driver.create_topic(kafka.topic_for(ex)))
        fp = driver.codec.schema_fingerprint(ExecutionRequested)
        records = []
        groups: dict[tuple[bytes, datetime, int], list[bytes]] = {}
        for i in range(self.n):
            second = i // args.jobs if args.jobs else i % args.seconds if args.seconds else -1
            due_ms = START_MS + 1_000 * (1 + second)
            ex = execution(i, args.tenants, due_ms, payload, args.jobs)
            if args.batch > 1:  # a tenant's executions of one due instant, `--batch` a record
                groups.setdefault((ex.tenant.encode(), ex.due_at, i % 2), []).append(
                    driver.codec.encode(ex)
                )
                continue
            headers = headers_for(ex, fp)
            records.append((driver.codec.encode(ex), ex.routing_key.encode(), headers, i % 2))
        batches = ExecutionBatches(driver.codec)
        for (key, due, partition), values in groups.items():
            for at in range(0, len(values), args.batch):
                chunk = values[at : at + args.batch]
                if len(chunk) == 1:  # as the scheduler writes a group of one: a record
                    one = driver.codec.decode_as(chunk[0], ExecutionRequested)
                    records.append((chunk[0], key, headers_for(one, fp), partition))
                    continue
                value, headers = batches.combine(key, due, chunk)
                records.append((value, key, headers, partition))
        self.unread = iter(records)
        if not args.per_turn:
            self.load(self.n)
        self.worker = driver.worker(settings, {"kafka": kafka})
        self.outcomes = [driver.cluster.log(topics.outcomes, p) for p in range(settings.partitions)]

    def load(self, k: int) -> int:
        """Write the next `k` executions (committed at once); how many there were."""
        loaded = 0
        for value, key, headers, partition in itertools.islice(self.unread, k):
            self.driver.produce(
                self.topics.executions, value, key=key, partition=partition, headers=headers
            )
            loaded += 1
        return loaded

    def done(self, due: int) -> bool:
        written = sum(
            _outcomes_in(e.value, e.headers)
            for log in self.outcomes
            for e in log.entries
            if not (e.pending or e.control or e.aborted)
        )
        return written >= due

    def turn(self) -> int:
        """One turn (`--per-turn` executions written before it); how many were written."""
        loaded = self.load(self.args.per_turn) if self.args.per_turn else 0
        start = time.process_time()
        if self.profile is not None:
            self.profile.enable()
        self.worker.turn(poll_s=0)
        if self.profile is not None:
            self.profile.disable()
        self.cpu += time.process_time() - start
        return loaded

    def run(self) -> float:
        """CPU seconds inside `Worker.turn` until every outcome is committed."""
        n, jobs = self.n, self.args.jobs
        seconds = n // jobs if jobs else self.args.seconds
        if seconds:
            while self.turn():  # read and prepared, nothing due yet
                pass
            for _ in range(n // 250 + 20):
                self.turn()
        for second in range(1, max(1, seconds) + 1):
            self.driver.advance(1_000 if seconds else 0)
            if jobs:
                due = jobs * second
            else:
                due = n if not seconds else sum(1 for i in range(n) if i % seconds < second)
            for _ in range(n // max(1, self.args.per_turn) + n // 10 + 1_000):
                self.turn()
                if self.done(due):
                    break
            else:
                raise AssertionError("the worker did not write every outcome")
        tenants = range(self.args.tenants)
        topics = {self.kafka.topic_for(execution(t, len(tenants), 0, b"")) for t in tenants}
        written = sum(len(self.driver.messages(topic)) for topic in topics)
        assert written == n, f"{written} tenant records for {n}"
        self.kafka._closed.set()
        self.kafka._background.shutdown(wait=False)
        self.driver.close()
        return self.cpu


def outcome_record_us(executions: int, rounds: int) -> None:
    """The delivered outcome's record (partition, key, value, headers), the generic path (the
    model, `Codec.encode`, `headers_for`, `partition_for`) and the template, alternating: CPU
    per record."""
    codec, settings, wid = Codec(), KadenceSettings(namespace="bench", partitions=2), "w-1"
    runs = []
    for i in range(executions):
        ex = execution(i, 10, START_MS, b"x" * 64)
        item = Item(i % 2, i, ex, START_MS)
        runs.append(ActiveRun(item, NO_STOP, START_MS + 7, START_MS, START_MS))
    fp = codec.schema_fingerprint(ExecutionOutcome)

    def generic(run: ActiveRun) -> object:
        ex, outcome = run.execution, delivered_outcome(run, wid)
        key, headers = ex.key.encode(), headers_for(outcome, fp)
        return partition_for(ex.routing_key, 2), key, codec.encode(outcome), headers

    for _ in range(rounds):
        template = DeliveredOutcomes(codec, wid, settings).record  # (partitions not yet known)
        for name, write in (("generic", generic), ("template", template)):
            start = time.process_time()
            for run in runs:
                write(run)
            took = (time.process_time() - start) / executions * 1e6
            print(f"outcome record, {name}: {took:.2f} us CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=20_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--payload", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=0)
    parser.add_argument("--per-turn", type=int, default=0)
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="per-second jobs the executions are runs of (--executions / --jobs seconds of "
        "them; 0: each execution a job of its own)",
    )
    parser.add_argument("--batch", type=int, default=1, help="executions a record (1: one)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--outcome-record", action="store_true")
    args = parser.parse_args()
    if not 1 <= args.executions <= MAX_EXECUTIONS:
        parser.error(f"--executions: 1 to {MAX_EXECUTIONS}")
    if not 0 <= args.payload <= MAX_PAYLOAD:
        parser.error(f"--payload: 0 to {MAX_PAYLOAD} bytes")
    if not 1 <= args.tenants <= args.executions:
        parser.error("--tenants: 1 to --executions")
    if not 0 <= args.per_turn <= args.executions:
        parser.error("--per-turn: 0 to --executions")
    if not 1 <= args.batch <= MAX_EXECUTIONS_PER_BATCH:
        parser.error(f"--batch: 1 to {MAX_EXECUTIONS_PER_BATCH}")
    if not 0 <= args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds: 0 to {MAX_SECONDS}")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    if args.jobs and (args.seconds or args.executions % args.jobs):
        parser.error("--jobs: without --seconds, and dividing --executions")
    tune_gc()
    with keeping(SWEEP_EVERY_S):  # as the worker process runs (apps/processes.py)
        _run(args)


def _run(args: argparse.Namespace) -> None:
    if args.outcome_record:
        outcome_record_us(args.executions, args.rounds)
        return
    per_exec = []
    for r in range(args.rounds):
        profile = cProfile.Profile() if args.profile and r == args.rounds - 1 else None
        cpu = _Round(args, profile).run()
        per_exec.append(cpu / args.executions * 1e6)
        print(f"round {r + 1}: {per_exec[-1]:.1f} us CPU per execution" + (
            " (under cProfile)" if profile is not None else ""))  # fmt: skip
        if profile is not None:
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.top)
            print(out.getvalue())
    plain = per_exec[:-1] if args.profile and len(per_exec) > 1 else per_exec
    print(
        f"worker CPU per execution: median {statistics.median(plain):.1f} us "
        f"({args.executions} executions, {args.tenants} tenants, {args.payload}-byte payload"
        f"{f', due over {args.seconds} s, read ahead' if args.seconds else ''}"
        f"{f', {args.per_turn} written a turn' if args.per_turn else ''}"
        f"{f', up to {args.batch} a record' if args.batch > 1 else ''}"
        f"{f', runs of {args.jobs} per-second jobs' if args.jobs else ''})"
    )


def _outcomes_in(value: bytes | None, headers: Headers | None) -> int:
    """Outcomes one record of the outcomes topic carries: a batch's count (the Avro array's
    first block count, after the single-object header), else one."""
    if value is not None and (TYPE, ExecutionOutcomes.avro_name.encode()) in (headers or []):
        return avro_fast.read_long(value, HEADER_LEN)[0]
    return 1


if __name__ == "__main__":
    main()
