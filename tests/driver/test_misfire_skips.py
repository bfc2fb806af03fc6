"""bench/misfire_skips.py counts what the scheduler's history says its missed-run policy
skipped: after an outage, every occurrence of a per-second job either went out or is counted
there, whichever way history told it (one record each, the summary past the first 1 000 listed,
a range outside the catch-up window)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench.misfire_skips import occurrences
from kadence.models import Decision, ScheduleDefinition
from testkit.driver import Driver
from testkit.driver.stack import DriverStack
from tests.driver.stack_helpers import per_second, settings_for

SECONDS = 1_140


def test_every_occurrence_went_out_or_is_counted_skipped(driver: Driver, tmp_path: Path) -> None:
    stack = DriverStack(driver, settings_for(tmp_path / "state", partitions=1))
    first = stack.scheduler("a")
    wide = per_second("wide", start_s=10, seconds=SECONDS)  # catch-up window 1 h: listed, summed
    narrow = ScheduleDefinition.model_validate(
        {
            **per_second("narrow", start_s=10, seconds=SECONDS).model_dump(),
            "missed": {"mode": "latest_once", "catch_up_window_ms": 60_000},
        }
    )  # a range before the window, then listed
    stack.put(wide, narrow)
    stack.run_for(15_000)
    driver.crash(first)
    driver.advance(1_100_000)  # down 1 100 s: far past the 30 s grace
    stack.scheduler("b")
    stack.run_for(40_000)  # past the jobs' end
    went_out = Counter(e.job_id for e in stack.executions() if e.attempt == 1)
    for job in ("wide", "narrow"):
        told = stack.history(job)
        skipped = sum(occurrences(h, 1_000) for h in told)
        assert went_out[job] + skipped == SECONDS, job
        assert skipped > 1_000, job  # the outage's, not a few
    shapes = {
        job: {k for h in stack.history(job) if h.decision is not Decision.fired for k in h.details}
        for job in ("wide", "narrow")
    }
    assert "unlisted" in shapes["wide"] and "range_from" in shapes["narrow"]
