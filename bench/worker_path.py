"""The worker's CPU per execution on the in-memory driver (no broker): Kafka-topic runs.

    python -m bench.worker_path [--executions 20000] [--tenants 10] [--rounds 3]
                                [--payload 64] [--ahead] [--profile] [--top 25]

Loads `--executions` ExecutionRequested records (Kafka-topic target, exactly once, Avro, a
`--payload`-byte payload, `--tenants` tenants, two executions partitions) into the executions
topic beforehand, then turns one worker until every outcome is committed: each run's tenant
record, its `succeeded` outcome and the consumer offsets in the worker's transactions, as in
production (testkit/driver: the worker is the real loop on memkafka). Due now by default;
`--ahead`: due one second later, read and prepared before the clock moves to the due instant
(B2's shape: the scheduler dispatches ahead). Prints the process CPU time spent inside
`Worker.turn` per execution, per round and the median (loading the records and counting the
outcomes are outside it). The in-memory cluster's own work (memkafka's produce, read, commit)
is inside it: compare two commits with the same command, not with a broker's figure.
`--profile`: the last round under cProfile, its top functions by cumulative time.

Side by side with another commit: run it from a second worktree of that commit, alternating.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
from datetime import timedelta
from typing import Any

from connectors.kafka_topic import KafkaTopicCaller
from kadence.clock import ms_to_datetime
from kadence.codec import Codec
from kadence.models import ExecutionRequested, KafkaTarget
from kadence.settings import KadenceSettings
from testkit.driver import START_MS, Driver

MAX_EXECUTIONS = 1_000_000
MAX_PAYLOAD = 100_000


class _NoClient:
    """Stands for the target's own producer and admin client: the exactly-once path never
    uses them (the worker's transaction writes the tenant's record)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the Kafka target's own client was used ({name})")


def execution(i: int, tenants: int, due_ms: int, payload: bytes) -> ExecutionRequested:
    due = ms_to_datetime(due_ms)
    tenant, job = f"tenant-{i % tenants}", f"job-{i}"
    return ExecutionRequested(
        execution_id=f"{tenant}/{job}@{due.isoformat()}",
        tenant=tenant,
        job_id=job,
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic="orders"),
        payload=payload,
        timeout_ms=30_000,
        lease_ttl_ms=30_000,
    )


def one_round(args: argparse.Namespace, profile: cProfile.Profile | None) -> float:
    """CPU seconds inside `Worker.turn` until every outcome is committed."""
    driver = Driver()
    settings = KadenceSettings(
        namespace="bench", partitions=2, execution_partitions=2, worker_tenant_max_share=1.0
    )
    topics = driver.provision(settings)
    kafka = KafkaTopicCaller("127.0.0.1:9", settings.namespace, 1, Codec())
    kafka.producer = kafka.admin = _NoClient()  # type: ignore[assignment]
    due_ms = START_MS + (1_000 if args.ahead else 0)
    payload = b"x" * args.payload
    for t in range(args.tenants):
        ex = execution(t, args.tenants, due_ms, payload)
        kafka._known.add(driver.create_topic(kafka.topic_for(ex)))
    for i in range(args.executions):
        ex = execution(i, args.tenants, due_ms, payload)
        driver.send(topics.executions, ex, key=ex.routing_key, partition=i % 2)
    worker = driver.worker(settings, {"kafka": kafka})
    n: int = args.executions
    outcomes = [driver.cluster.log(topics.outcomes, p) for p in range(settings.partitions)]

    def done() -> bool:
        written = sum(
            1 for log in outcomes for e in log.entries if not (e.pending or e.control or e.aborted)
        )
        return written >= n

    cpu = 0.0

    def turn() -> None:
        nonlocal cpu
        start = time.process_time()
        if profile is not None:
            profile.enable()
        worker.turn(poll_s=0)
        if profile is not None:
            profile.disable()
        cpu += time.process_time() - start

    if args.ahead:
        for _ in range(args.executions // 250 + 20):  # read and prepared, nothing due yet
            turn()
        driver.advance(1_000)
    for _ in range(args.executions // 10 + 1_000):
        turn()
        if done():
            break
    else:
        raise AssertionError("the worker did not write every outcome")
    written = sum(len(driver.messages(kafka.topic_for(execution(t, args.tenants, 0, b""))))
                  for t in range(args.tenants))  # fmt: skip
    assert written == args.executions, f"{written} tenant records for {args.executions}"
    kafka._closed.set()
    kafka._background.shutdown(wait=False)
    driver.close()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=20_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--payload", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ahead", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    if not 1 <= args.executions <= MAX_EXECUTIONS:
        parser.error(f"--executions: 1 to {MAX_EXECUTIONS}")
    if not 0 <= args.payload <= MAX_PAYLOAD:
        parser.error(f"--payload: 0 to {MAX_PAYLOAD} bytes")
    if not 1 <= args.tenants <= args.executions:
        parser.error("--tenants: 1 to --executions")
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    per_exec = []
    for r in range(args.rounds):
        profile = cProfile.Profile() if args.profile and r == args.rounds - 1 else None
        cpu = one_round(args, profile)
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
        f"{', read ahead' if args.ahead else ''})"
    )


if __name__ == "__main__":
    main()
