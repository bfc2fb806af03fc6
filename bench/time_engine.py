"""Time-engine benchmark: µs per next() uncached and cached, and per-job cost in a burst.

    make bench-time            # or: python -m bench.time_engine --jobs 100000 --pairs 1000

The burst is the top of an hour: N jobs sharing P distinct (expression, zone) pairs all advance
from the same cursor. With the per-(rule, cursor) cache that is P searches and N - P lookups;
the baseline runs one full croniter walk per job. Results go to bench/results/time_engine.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from kadence.clock import datetime_to_ms
from kadence.models import CronSchedule
from kadence.timeengine import cron as cron_module
from kadence.timeengine import engine
from kadence.timeengine.compile import compile_schedule
from kadence.timeengine.engine import CompiledSchedule

ZONES = [
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "America/New_York",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
    "Pacific/Auckland",
]
CURSOR = datetime_to_ms(datetime(2026, 11, 30, 0, 0, tzinfo=UTC))
RESULTS = Path(__file__).resolve().parent / "results"


def expressions(count: int) -> list[str]:
    """A mix like real fleets: hourly at some minute, daily at some time, weekdays, every N."""
    out = []
    for i in range(count):
        kind = i % 4
        if kind == 0:
            out.append(f"{i % 60} * * * *")
        elif kind == 1:
            out.append(f"{i % 60} {i // 60 % 24} * * *")
        elif kind == 2:
            out.append(f"{i % 60} {i // 60 % 24} * * 1-5")
        else:
            out.append(f"*/{[5, 10, 15, 20, 30][i % 5]} {i % 24}-23 * * *")
    return out


def clear_caches() -> None:
    engine.search.cache_clear()
    cron_module._next_local.cache_clear()


def per_call_us(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - t0) / repeat * 1e6)
    return statistics.median(samples)


def bench_next(schedules: list[CompiledSchedule]) -> dict[str, float]:
    """µs per next_after: caches cleared before each call, vs. the same call again."""
    i = 0

    def uncached() -> object:
        nonlocal i
        clear_caches()
        i = (i + 1) % len(schedules)
        return schedules[i].next_after(CURSOR)

    def cached() -> object:
        return schedules[0].next_after(CURSOR)

    cached()
    return {
        "next_uncached_us": per_call_us(uncached, 400),
        "next_cached_us": per_call_us(cached, 20_000),
    }


def bench_burst(jobs: int, pairs: int) -> dict[str, float]:
    exprs = expressions(max(1, pairs // len(ZONES)))
    combos = [(e, z) for e in exprs for z in ZONES][:pairs]
    t0 = time.perf_counter()
    compiled = [
        compile_schedule(
            CronSchedule(
                expression=combos[j % len(combos)][0], timezone=combos[j % len(combos)][1]
            ),
            f"tenant-{j % 500}/job-{j}",
        )
        for j in range(jobs)
    ]
    compile_us = (time.perf_counter() - t0) / jobs * 1e6

    clear_caches()
    t0 = time.perf_counter()
    for c in compiled:
        c.next_after(CURSOR)
    burst_cold_us = (time.perf_counter() - t0) / jobs * 1e6

    t0 = time.perf_counter()
    for c in compiled:
        c.next_after(CURSOR)
    burst_warm_us = (time.perf_counter() - t0) / jobs * 1e6

    # baseline: one full search per job, nothing shared
    sample = compiled[: min(jobs, 5_000)]
    t0 = time.perf_counter()
    for c in sample:
        clear_caches()
        assert c.rule is not None
        engine.search.__wrapped__(c.rule, CURSOR)
    baseline_us = (time.perf_counter() - t0) / len(sample) * 1e6
    return {
        "jobs": jobs,
        "distinct_pairs": len(combos),
        "compile_us_per_job": compile_us,
        "burst_cold_cache_us_per_job": burst_cold_us,
        "burst_warm_cache_us_per_job": burst_warm_us,
        "burst_no_sharing_us_per_job": baseline_us,
        "burst_seconds_cold": burst_cold_us * jobs / 1e6,
        "burst_seconds_no_sharing": baseline_us * jobs / 1e6,
        "speedup_vs_no_sharing": baseline_us / burst_cold_us,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=1_000)
    args = parser.parse_args(argv)
    sample = [
        compile_schedule(CronSchedule(expression=e, timezone=z), f"acme/{n}")
        for n, (e, z) in enumerate((e, z) for e in expressions(40) for z in ZONES)
    ]
    results: dict[str, float] = {**bench_next(sample), **bench_burst(args.jobs, args.pairs)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "time_engine.json").write_text(json.dumps(results, indent=2) + "\n")
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(
            f"{key:<{width}}  {value:>12.2f}"
            if isinstance(value, float)
            else f"{key:<{width}}  {value:>12}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
