"""A burst of jobs sharing rules costs one search per distinct rule, not one per job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import time_engine
from kadence.models import CronSchedule
from kadence.timeengine import engine
from kadence.timeengine.compile import compile_schedule


def test_two_thousand_jobs_on_twenty_rules_walk_croniter_twenty_times() -> None:
    rules = [(f"{m} * * * *", z) for m in (0, 15, 30, 45) for z in time_engine.ZONES[:5]]
    jobs = [
        compile_schedule(CronSchedule(expression=e, timezone=z), f"t{i % 7}/job-{i}")
        for i in range(2000)
        for e, z in [rules[i % len(rules)]]
    ]
    time_engine.clear_caches()
    results = [job.next_after(time_engine.CURSOR) for job in jobs]
    info = engine.search.cache_info()
    assert info.misses == len(rules) == 20
    assert info.hits == 2000 - 20
    assert all(r is not None for r in results)


def test_benchmark_smoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The benchmark runs end to end on a small burst and writes its figures."""
    monkeypatch.setattr(time_engine, "RESULTS", tmp_path)
    assert time_engine.main(["--jobs", "500", "--pairs", "50"]) == 0
    figures = json.loads((tmp_path / "time_engine.json").read_text())
    assert figures["jobs"] == 500
    assert figures["distinct_pairs"] == 50
    for key in ("next_uncached_us", "next_cached_us", "burst_cold_cache_us_per_job"):
        assert figures[key] > 0
