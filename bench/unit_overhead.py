"""What running each timer firing as a unit of work costs (streams/runtime/task.py,
`Task.attempt`: state writes and records staged, undone if the firing raises), against calling
the scheduler processor directly. No broker: N one-off jobs due at one instant on an in-memory
task, fired both ways, alternating, several rounds; the ratio is the figure (the machine is
shared: absolute times drift).

    python -m bench.unit_overhead [--jobs 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime
from functools import partial

from kadence.codec import Codec
from kadence.models import KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from streams.runtime.records import InputRecord
from streams.runtime.store import Batch, MemoryStore
from streams.runtime.task import Task
from streams.scheduler.processor import SchedulerConfig, SchedulerProcessor

CODEC = Codec()
DUE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
NOW = int(DUE.timestamp() * 1000)


def loaded(jobs: int) -> tuple[SchedulerProcessor, Task]:
    topics = Topics(KadenceSettings(partitions=1))
    proc = SchedulerProcessor(SchedulerConfig(topics, 1, 1, "2025b"), CODEC)
    task = Task(0, MemoryStore(), NOW - 60_000, 60_000)
    task._emit = lambda *_a: None
    task.changelog = topics.scheduler_changelog
    for i in range(jobs):
        d = ScheduleDefinition(
            tenant="acme",
            job_id=f"j{i}",
            version=1,
            schedule={"kind": "once", "run_at": DUE},
            target=KafkaTarget(topic="o"),
        )
        rec = InputRecord(topics.schedules, 0, i, d.key.encode(), CODEC.encode(d), [], NOW)
        proc.process(task, rec, NOW - 60_000)
    task.store.apply(task.batch)
    task.batch = Batch()
    return proc, task


def fire_all(jobs: int, as_units: bool) -> float:
    proc, task = loaded(jobs)
    keys = [f"acme/j{i}".encode() for i in range(jobs)]
    started = time.perf_counter()
    for key in keys:
        if as_units:
            task.attempt(
                partial(proc.fire, task, key, NOW), partial(proc.quarantine, task, key, now_ms=NOW)
            )
        else:
            proc.fire(task, key, NOW)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for round_ in range(args.rounds):
        direct = fire_all(args.jobs, as_units=False)
        units = fire_all(args.jobs, as_units=True)
        print(
            f"round {round_}: direct {direct / args.jobs * 1e6:.1f} us/fire, "
            f"as units {units / args.jobs * 1e6:.1f} us/fire, ratio {units / direct:.3f}"
        )


if __name__ == "__main__":
    main()
