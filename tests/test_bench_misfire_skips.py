"""bench/misfire_skips.py's profile of what a missed-run policy skipped (`Skips`): how many,
on which job partitions, decided when and how late, from history records as the scheduler
writes them. No broker: the records are built here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.headline import headline
from bench.misfire_skips import CAPS, Skips
from kadence.client import routing_key
from kadence.models import Decision, HistoryRecord
from kadence.partitioning import partition_for
from streams.scheduler.tenant_limits import TenantCaps, TenantLoad

START = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)
PARTITIONS = 12


def skip(job: str, due_s: float, noticed_s: float, **details: str) -> HistoryRecord:
    return HistoryRecord(
        tenant="t1",
        job_id=job,
        decision=Decision.coalesced,
        at=START + timedelta(seconds=noticed_s),
        due_at=START + timedelta(seconds=due_s),
        details=details,
    )


def test_skips_are_counted_by_job_partition_by_when_decided_and_by_how_late() -> None:
    found = Skips(START.timestamp())
    for due in range(100, 130):
        found.add(skip("a", due, 165.5), 1_000, PARTITIONS)
    found.add(skip("b", 200, 242, unlisted="5"), 1_000, PARTITIONS)  # a summary: 5, no lateness
    fired = HistoryRecord(tenant="t1", job_id="c", decision=Decision.fired, at=START)
    found.add(fired, 1_000, PARTITIONS)  # skips nothing: not counted anywhere
    waits = HistoryRecord(
        tenant="t1", job_id="c", decision=Decision.throttled, at=START,
        reason="the tenant has 9 runs in progress ... (KADENCE_TENANT_MAX_IN_FLIGHT); runs go on",
    )  # fmt: skip
    found.add(waits, 1_000, PARTITIONS)  # skips nothing either, but is said, with its cap
    a = partition_for(routing_key("t1", "a", None), PARTITIONS)
    b = partition_for(routing_key("t1", "b", None), PARTITIONS)
    assert found.total == 35
    detail = found.as_row()
    expect: dict[int, int] = {a: 30}
    expect[b] = expect.get(b, 0) + 5
    assert detail["by_job_partition"] == dict(sorted(expect.items()))
    assert detail["noticed_s_after_start"] == {160: 30, 240: 5}
    assert detail["late_when_noticed_s"] == {"min": 36.5, "max": 65.5}
    assert detail["jobs"] == 2
    assert detail["decisions"] == {"coalesced": 31, "throttled": 1}
    assert detail["throttled_by"] == {"KADENCE_TENANT_MAX_IN_FLIGHT": 1}


def test_nothing_skipped_adds_nothing_to_the_row() -> None:
    assert Skips(START.timestamp()).as_row() == {}


def test_the_line_says_where_and_when_the_skips_were_decided() -> None:
    found = Skips(START.timestamp())
    for due in range(100, 103):
        found.add(skip("a", due, 131), 1_000, PARTITIONS)
    waits = HistoryRecord(tenant="t1", job_id="a", decision=Decision.throttled, at=START)
    found.add(waits, 1_000, PARTITIONS)  # no cap named: `other`
    row = {
        "rate_per_s": 8000,
        "on_time": False,
        "p99_after_warm_up_s": 0.6,
        "skipped_late": found.total,
        "skipped_late_detail": found.as_row(),
    }
    a = partition_for(routing_key("t1", "a", None), PARTITIONS)
    assert headline(row) == (
        f"8000/s NOT on time: p99 0.6 s, 3 skipped late (missed-run policy: 1 jobs on job "
        f"partitions {a}, decided 130-140 s after the start; history also says throttled 1 "
        "(other 1))"
    )


def test_it_says_how_many_runs_in_progress_the_cap_was_told_and_from_when() -> None:
    """`in_progress_told`: the runs in progress the scheduler's own reasons name (`why_not`'s
    words, as written), their least and most, and the first such record's time."""
    found = Skips(START.timestamp())
    found.add(skip("a", 100, 165), 1_000, PARTITIONS)
    for at_s, running in ((12.5, 50_003), (40.0, 50_000), (30.25, 51_200)):
        reason = TenantLoad(TenantCaps(in_flight=50_000), running=running).why_not(
            0, {}, 0, mine=False
        )
        waits = HistoryRecord(
            tenant="t1", job_id="c", decision=Decision.throttled,
            at=START + timedelta(seconds=at_s), reason=reason,
        )  # fmt: skip
        found.add(waits, 1_000, PARTITIONS)
    per_second = TenantLoad(TenantCaps(fires_per_s=1), fired={0: 1}).why_not(0, {}, 0, mine=False)
    found.add(
        HistoryRecord(
            tenant="t1", job_id="d", decision=Decision.throttled, at=START, reason=per_second
        ),
        1_000,
        PARTITIONS,
    )  # another cap: not counted
    assert found.as_row()["in_progress_told"] == {
        "first_s_after_start": 12.5,
        "runs_min": 50_000,
        "runs_max": 51_200,
    }


def test_the_caps_it_tells_apart_are_the_ones_the_scheduler_names() -> None:
    """`throttled_by` reads the setting a reason names: each cap's reason names its own."""
    in_flight = TenantLoad(TenantCaps(in_flight=1), running=1).why_not(0, {}, 0, mine=False)
    per_second = TenantLoad(TenantCaps(fires_per_s=1), fired={0: 1}).why_not(0, {}, 0, mine=False)
    assert in_flight is not None and per_second is not None
    assert [c for c in CAPS if c in in_flight] == ["KADENCE_TENANT_MAX_IN_FLIGHT"]
    assert [c for c in CAPS if c in per_second] == ["KADENCE_TENANT_FIRES_PER_S"]
