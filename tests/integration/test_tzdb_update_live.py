"""A tz database update, live (issue 17, item 9): a zone whose rules really change between two
versions (compiled by the test with zic), a scheduler restarted on the new version with the
state the old one left: the job is recomputed by the production path and the move reported."""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterator
from pathlib import Path

import pytest

from kadence.client import KadenceClient
from kadence.clock import datetime_to_ms
from kadence.models import Decision, HistoryRecord, KafkaTarget, ScheduleDefinition
from kadence.settings import KadenceSettings
from kadence.topics import Topics
from testkit.scheduler_process import SchedulerProcess, history
from testkit.stack import until
from testkit.topic_reader import read_topic
from testkit.tzdb import build_tzdb

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def zones(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Two versions of Kadence/Shift: UTC, then 30 s ahead of it. The test process sees the
    old one too (the SDK checks the zone exists)."""
    old = build_tzdb(tmp_path / "tz", "2099a", {"Kadence/Shift": "0"})
    new = build_tzdb(tmp_path / "tz", "2099b", {"Kadence/Shift": "0:00:30"})
    zoneinfo.reset_tzpath([str(old)])
    zoneinfo.ZoneInfo.clear_cache()
    try:
        yield old, new
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()


def job_state_written(settings: KadenceSettings, key: bytes) -> bool:
    msgs = read_topic(settings.bootstrap_servers, Topics(settings).scheduler_changelog, 1000, 2)
    return any(m.key() == key and m.value() for m in msgs)


def test_a_restart_on_a_new_tz_database_reschedules_and_reports_it(
    settings: KadenceSettings,
    zones: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old, new = zones
    d = ScheduleDefinition(
        tenant="acme",
        job_id="shifty",
        version=1,
        schedule={
            "kind": "cron",
            "expression": "* * * * *",
            "spread_s": 0,
            "timezone": "Kadence/Shift",
        },
        target=KafkaTarget(topic="out"),
    )
    monkeypatch.setenv("PYTHONTZPATH", str(old))
    sched = SchedulerProcess(settings, "a", tmp_path / "s").start()
    try:
        with KadenceClient(settings) as client:
            client.put(d)
        # the job's own state in the changelog, not just any record (the tz marker comes first)
        until(lambda: job_state_written(settings, b"acme/shifty"), 60, "the job's state")
    finally:
        sched.stop()
    monkeypatch.setenv("PYTHONTZPATH", str(new))  # the next release ships tz database 2099b
    sched = SchedulerProcess(settings, "a", tmp_path / "s").start()
    try:

        def rescheduled() -> list[HistoryRecord]:
            return [
                h
                for h in history(settings, 100_000, 2)
                if h.job_id == "shifty" and h.decision is Decision.rescheduled
            ]

        [moved] = until(rescheduled, 60, "a rescheduled record for the job")
    finally:
        sched.stop()
    assert moved.details["tzdb"] == "2099b"
    assert "2099a -> 2099b" in (moved.reason or "")
    assert moved.nominal_at is not None
    assert datetime_to_ms(moved.nominal_at) % 60_000 == 30_000  # a local minute is now at :30
    assert int(moved.details["old_nominal_ms"]) % 60_000 == 0
