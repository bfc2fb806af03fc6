"""What charging the loops' CPU by kind of work costs (kadence/work_cpu.py), on the in-memory
driver (no broker).

    python -m bench.loop_accounting [--jobs 1000] [--seconds 60] [--rounds 3]

B2's shape: `--jobs` per-second cron jobs (overlap allowed, dispatched ahead as by default) on
the real scheduler, reaper and a worker (testkit/driver; the in-process handler target), the
clock moved a second at a time and every loop turned until it settles. After the look-ahead
filled (the first 35 s of due time), the seconds alternate: with the accounting, and with
`WorkCpu`'s methods replaced by ones that do nothing (the loops still call them); each round is
one run, the next starts with the other. Prints the loop thread's CPU per execution each way
(the in-memory cluster's work is in it, as in bench.worker_path), each round's ratio, and how
often the accounting read the
thread's clock and was called per execution; with what a call costs with a clock read and
without (timed alone, best of five), that bounds the accounting's cost per execution.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

from kadence.clock import ms_to_datetime
from kadence.models import CronSchedule, HandlerTarget, OverlapPolicy, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.work_cpu import WorkCpu
from testkit.driver import START_MS, Driver
from testkit.driver.stack import DriverStack

WARM_UP_S = 35
MAX_JOBS = 100_000
MAX_SECONDS = 3_600
_thread_ns = time.thread_time_ns  # the bench's own clock: not counted as the accounting's reads


def definitions(jobs: int, seconds: int) -> Iterator[ScheduleDefinition]:
    start = ms_to_datetime(START_MS + 1_000)
    for i in range(jobs):
        yield ScheduleDefinition(
            tenant=f"tenant-{i % 20}",
            job_id=f"every-second-{i}",
            version=1,
            schedule=CronSchedule(
                expression="* * * * * *", start_at=start, end_at=start + timedelta(seconds=seconds)
            ),
            target=HandlerTarget(name="ok"),
            overlap=OverlapPolicy.allow,
        )


def one_run(jobs: int, seconds: int, first_on: bool = True) -> dict[bool, float]:
    """The loop thread's CPU seconds over the counted seconds with the accounting (True) and
    without (False), each half of them (one of two from `first_on`)."""
    spent = {True: 0.0, False: 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        driver = Driver()
        settings = KadenceSettings(namespace="acct", partitions=2, execution_partitions=2)
        stack = DriverStack(driver, settings.model_copy(update={"state_dir": Path(tmp)}))
        try:
            stack.scheduler(in_memory=True)
            stack.reaper(in_memory=True)
            stack.worker()
            stack.settle()
            stack.put(*definitions(jobs, seconds))
            stack.settle(passes=5_000, wait_s=600)
            for second in range(seconds):
                on = second < WARM_UP_S or (second % 2 == 0) == first_on
                with nullcontext() if on else accounting_off():
                    started = _thread_ns()
                    driver.advance(1_000)
                    stack.settle(passes=5_000, wait_s=600)
                    took = _thread_ns() - started
                if second >= WARM_UP_S:
                    spent[on] += took / 1e9
            return spent
        finally:
            stack.close()
            driver.close()


@contextmanager
def accounting_off() -> Iterator[None]:
    """`WorkCpu`'s methods do nothing meanwhile (the loops' calls stay)."""
    saved = WorkCpu.switch, WorkCpu.topic, WorkCpu.during
    WorkCpu.switch = lambda self, work: None  # type: ignore[method-assign]
    WorkCpu.topic = lambda self, topic: None  # type: ignore[method-assign]
    WorkCpu.during = lambda self, work: nullcontext()  # type: ignore[method-assign,assignment,return-value]
    try:
        yield
    finally:
        WorkCpu.switch, WorkCpu.topic, WorkCpu.during = saved  # type: ignore[method-assign]


@contextmanager
def counted(counts: dict[str, int]) -> Iterator[None]:
    """Count the thread clock's reads and the accounting's calls meanwhile."""
    saved_switch, saved_topic, saved_clock = WorkCpu.switch, WorkCpu.topic, time.thread_time_ns

    def counting(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return call(*args)

        return wrapped

    WorkCpu.switch = counting("calls", saved_switch)  # type: ignore[method-assign]
    WorkCpu.topic = counting("calls", saved_topic)  # type: ignore[method-assign]
    time.thread_time_ns = counting("clock reads", saved_clock)
    try:
        yield
    finally:
        WorkCpu.switch, WorkCpu.topic = saved_switch, saved_topic  # type: ignore[method-assign]
        time.thread_time_ns = saved_clock


def call_costs_ns(n: int = 200_000) -> tuple[float, float]:
    """CPU ns of a `switch` that changes the kind (a clock read) and of one that does not."""
    work = WorkCpu()
    changing, same = [], []
    for _ in range(5):
        started = _thread_ns()
        for _ in range(n // 2):
            work.switch("a")
            work.switch("b")
        changing.append((_thread_ns() - started) / n)
        started = _thread_ns()
        for _ in range(n):
            work.switch("b")
        same.append((_thread_ns() - started) / n)
    return min(changing), min(same)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.loop_accounting", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not 1 <= args.jobs <= MAX_JOBS:
        parser.error(f"--jobs must be 1 to {MAX_JOBS}")
    if not WARM_UP_S + 2 <= args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be {WARM_UP_S + 2} to {MAX_SECONDS}")
    if args.rounds < 1:
        parser.error("--rounds must be 1 or more")
    on_us: list[float] = []
    off_us: list[float] = []
    counted_s = args.seconds - WARM_UP_S
    for r in range(args.rounds):
        first_on = r % 2 == 0
        spent = one_run(args.jobs, args.seconds, first_on)
        n_on = sum((sec % 2 == 0) == first_on for sec in range(WARM_UP_S, args.seconds))
        for on, n in ((True, n_on), (False, counted_s - n_on)):  # the seconds run each way
            (on_us if on else off_us).append(spent[on] * 1e6 / (args.jobs * max(1, n)))
        print(
            f"round {r + 1}: with {on_us[-1]:.1f} µs/exec, without {off_us[-1]:.1f}: "
            f"{on_us[-1] / off_us[-1]:.4f}",
            flush=True,
        )
    ratios = [a / b for a, b in zip(on_us, off_us, strict=True)]
    print(
        f"{args.jobs} per-second jobs, {args.seconds} s, {args.rounds} rounds: loop CPU per "
        f"execution with the accounting {statistics.median(on_us):.1f} µs, without "
        f"{statistics.median(off_us):.1f} µs; with/without per round "
        + ", ".join(f"{x:.4f}" for x in ratios)
        + f" (median {statistics.median(ratios):.4f})"
    )
    counts: dict[str, int] = {}
    with counted(counts):
        one_run(args.jobs, WARM_UP_S + 5)
    every = args.jobs * (WARM_UP_S + 5)  # the whole run is counted here, warm-up included
    reads, calls = counts.get("clock reads", 0) / every, counts.get("calls", 0) / every
    read_ns, same_ns = call_costs_ns()
    bound_ns = reads * read_ns + max(0.0, calls - reads) * same_ns
    print(
        f"per execution due, over a {WARM_UP_S + 5} s run: {reads:.3f} clock reads, {calls:.3f} "
        f"calls; a call {read_ns:.0f} ns with a clock read, {same_ns:.0f} ns without: "
        f"{bound_ns:.0f} ns per execution"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
