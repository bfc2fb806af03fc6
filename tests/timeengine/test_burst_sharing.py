"""A burst of jobs sharing rules costs one search per distinct rule, not one per job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import time_engine
from kadence.errors import InvalidScheduleError
from kadence.models import CronSchedule
from kadence.timeengine import compile as compile_module
from kadence.timeengine import engine, zones
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


@pytest.mark.parametrize(
    ("expression", "zone", "years"),
    [
        ("* * * * * *", "UTC", 1),
        ("0 9 * * *", "Asia/Kolkata", 1),
        ("0 0 1 1 *", "UTC", 2),  # its next match is next year's first instant
        ("30 1 * * *", "Europe/London", 1),
    ],
)
def test_the_first_search_probes_the_zone_up_to_the_match_not_the_horizon(
    expression: str, zone: str, years: int
) -> None:
    """Each (zone, year) is probed hour by hour once per process. The search used to look for
    the next transition up to its horizon, which in a zone without any (UTC, the default; India)
    probed 29 years, 0.25 s of the scheduler's one loop on the first cron job of a process and
    seconds on a loaded machine: the first runs of a job put a few seconds ahead went out late,
    together. Only the years up to the next match are probed now."""
    job = compile_schedule(CronSchedule(expression=expression, timezone=zone), "t/job")
    time_engine.clear_caches()
    zones.year_transitions.cache_clear()
    assert job.next_after(time_engine.CURSOR) is not None
    assert zones.year_transitions.cache_info().misses == years


def test_compiling_two_thousand_jobs_on_twenty_rules_walks_each_rules_interval_once_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The spread check (a hundred occurrences each) was most of what accepting a definition
    cost: the default spread of a 5-field expression needs no walk at all, and a wider spread
    walks once per rule, not once per job."""
    rules = [(f"{m} * * * *", z) for m in (0, 15, 30, 45) for z in time_engine.ZONES[:5]]
    probes: list[int] = []
    upcoming = engine.CompiledSchedule.upcoming

    def counted(self: engine.CompiledSchedule, cursor_ms: int, count: int) -> list[Any]:
        probes.append(count)
        return upcoming(self, cursor_ms, count)

    monkeypatch.setattr(engine.CompiledSchedule, "upcoming", counted)
    compile_module.shortest_gap_ms.cache_clear()

    def compile_all(spread_s: int | None) -> list[engine.CompiledSchedule]:
        return [
            compile_schedule(
                CronSchedule(expression=e, timezone=z, spread_s=spread_s), f"t{i % 7}/job-{i}"
            )
            for i in range(2000)
            for e, z in [rules[i % len(rules)]]
        ]

    by_default = compile_all(None)
    assert probes == []
    assert len({job.spread_ms for job in by_default}) > 100  # each job has its own offset
    compile_all(120)
    assert len(probes) == len(rules) == 20
    refused = CronSchedule(expression="*/5 * * * *", timezone="UTC", spread_s=301)
    for _ in range(2):  # a cached interval refuses as the first computation did
        with pytest.raises(InvalidScheduleError, match=r"shortest interval \(300 s\)"):
            compile_schedule(refused, "t/x")


def test_benchmark_smoke(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The benchmark runs end to end on a small burst and writes its figures."""
    monkeypatch.setattr(time_engine, "RESULTS", tmp_path)
    assert time_engine.main(["--jobs", "500", "--pairs", "50"]) == 0
    figures = json.loads((tmp_path / "time_engine.json").read_text())
    assert figures["jobs"] == 500
    assert figures["distinct_pairs"] == 50
    for key in ("next_uncached_us", "next_cached_us", "burst_cold_cache_us_per_job"):
        assert figures[key] > 0
