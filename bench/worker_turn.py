"""The worker loop's cost per turn with many runs in flight, on the in-memory driver (no broker).

    python -m bench.worker_turn [--runs 1000] [--turns 2000]

Claims `--runs` executions whose target blocks until released, then times `--turns` idle turns
(nothing to read, claim, renew or report: the driver's clock stands still) and one turn that
reports 1% of the runs finished. Prints CPU per turn (process time; the invocation threads are
parked on an event, so it is the loop's own work).
"""

from __future__ import annotations

import argparse
import threading
import time
from datetime import timedelta

from kadence.clock import ms_to_datetime
from kadence.models import ExecutionRequested, KafkaTarget
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from testkit.driver import START_MS, Driver


def execution(i: int) -> ExecutionRequested:
    due = ms_to_datetime(START_MS)
    return ExecutionRequested(
        execution_id=f"t{i % 10}/j{i}@2026-12-01T08:00:00.000Z",
        tenant=f"t{i % 10}",
        job_id=f"j{i}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic="t"),
        timeout_ms=600_000,
        lease_ttl_ms=30_000,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--turns", type=int, default=2_000)
    args = parser.parse_args()
    gates: dict[str, threading.Event] = {}

    def target(ex: ExecutionRequested, stop: Stop, _deadline: float) -> Result:
        gate = gates.setdefault(ex.execution_id, threading.Event())
        stop.on_stop(gate.set)
        gate.wait()  # parked without waking up: the CPU measured is the loop's
        return Result.ok()

    driver = Driver()
    settings = KadenceSettings(
        namespace="bench", partitions=2, execution_partitions=2, worker_concurrency=args.runs
    )
    settings = settings.model_copy(update={"worker_tenant_max_share": 1.0})
    topics = driver.provision(settings)
    worker = driver.worker(settings, {"kafka": target})
    for i in range(args.runs):
        ex = execution(i)
        driver.send(topics.executions, ex, key=ex.routing_key, partition=i % 2)
    driver.turn_until(lambda: len(worker.runs) == args.runs, worker, turns=1_000, wait_s=60)
    time.sleep(0.5)
    cpu = time.process_time()
    for _ in range(args.turns):
        worker.turn(poll_s=0)
    idle = (time.process_time() - cpu) / args.turns
    some = list(worker.runs)[: max(1, args.runs // 100)]
    for execution_id in some:
        gates[execution_id].set()
    time.sleep(0.5)  # they have all finished: one turn reports them
    cpu = time.process_time()
    worker.turn(poll_s=0)
    report = time.process_time() - cpu
    assert not any(e in worker.runs for e in some)
    print(
        f"runs in flight: {args.runs}; idle turn: {idle * 1e6:.0f} us CPU; "
        f"the turn reporting {len(some)} finished: {report * 1e3:.1f} ms CPU"
    )
    for gate in gates.values():
        gate.set()
    driver.turn_until(lambda: not worker.runs, worker, turns=10_000, wait_s=30)
    driver.close()


if __name__ == "__main__":
    main()
