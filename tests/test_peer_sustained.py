"""bench.sustained's verdict and bench/peers' sustained db-scheduler mode, without a JVM or a
database: the judging of one rate, and the reading of the handler's file while it grows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.cpu import tree_cpu_seconds
from bench.peers.dbscheduler_sustained import _each_second, _Starts
from bench.sustained import knee, late_by_partition, late_seconds, summarize, tail_seconds
from bench.sustained import main as sustained_main
from kadence.client import routing_key
from kadence.partitioning import execution_route, partition_for
from kadence.settings import KadenceSettings


def _runs(rate: int, seconds: int, late: float) -> list[tuple[float, float, float]]:
    return [(1000.0 + s, 1000.0 + s + late, 1000.0 + s + late) for s in range(seconds)] * rate


def test_a_rate_on_time_late_or_lossy() -> None:
    on_time = summarize(2, 30, 1000.0, _runs(2, 30, 0.2))
    assert on_time["on_time"] and on_time["lost"] == 0 and on_time["p99_after_warm_up_s"] == 0.2
    late = summarize(2, 30, 1000.0, _runs(2, 30, 1.5))
    assert not late["on_time"]
    lossy = summarize(2, 30, 1000.0, _runs(2, 30, 0.2)[1:])
    assert not lossy["on_time"] and lossy["lost"] == 1
    skipped = summarize(2, 30, 1000.0, _runs(2, 30, 0.2)[3:], skipped=2)  # 3 never started
    assert not skipped["on_time"]  # every run must start
    assert (skipped["skipped_late"], skipped["lost"]) == (2, 1)  # 2 by the missed-run policy
    assert not summarize(2, 30, 1000.0, _runs(2, 30, 0.2), also_steady=1.2)["on_time"]
    rows = [{"rate_per_s": 10, "on_time": True}, {"rate_per_s": 20, "on_time": False}]
    assert knee(rows) == 10 and knee([]) is None


def test_a_run_of_the_tail_that_never_started_is_lost_and_fails_the_rate() -> None:
    """The jobs go on after the window for the look-ahead (tail_seconds): their runs are not
    judged for lateness, but one that never started is lost like any other, and one skipped
    late fails the rate as one of the window would."""
    whole = summarize(2, 30, 1000.0, _runs(2, 30, 0.2), unstarted_after=0)
    assert whole["on_time"] and whole["lost"] == 0
    lost = summarize(2, 30, 1000.0, _runs(2, 30, 0.2), unstarted_after=3)
    assert (lost["lost"], lost["on_time"]) == (3, False)
    skipped = summarize(2, 30, 1000.0, _runs(2, 30, 0.2), skipped=3, unstarted_after=3)
    assert (skipped["lost"], skipped["skipped_late"]) == (0, 3)  # skipped on purpose, after
    assert not skipped["on_time"]  # the window: a tail's run the policy gave up on never ran
    assert tail_seconds(KadenceSettings(dispatch_ahead_ms=30_000)) == 30
    assert tail_seconds(KadenceSettings(dispatch_ahead_ms=1_500)) == 2


def test_growing_lateness_is_not_on_time() -> None:
    runs = [(1000.0 + s, 1000.0 + s + (0.9 if s >= 30 else 0.0), 1000.0 + s) for s in range(45)]
    row = summarize(1, 45, 1000.0, runs)  # p99 after the warm-up is 0.9 s: under 1 s
    assert row["p99_after_warm_up_s"] < 1.0
    assert row["p99_growth_s"] >= 0.5 and not row["on_time"]


def test_starts_are_read_as_the_file_grows(tmp_path: Path) -> None:
    csv = tmp_path / "starts.csv"
    starts = _Starts(csv)
    starts.read()  # not there yet
    csv.write_text("0@1000,1000.25\n1@1000,1000.5\n0@10")
    starts.read()
    assert starts.first == {"0@1000": (1000.0, 1000.25), "1@1000": (1000.0, 1000.5)}
    with csv.open("a") as f:
        f.write("01,1001.125\n0@1000,1000.75\n")
    starts.read()
    assert starts.first["0@1001"] == (1001.0, 1001.125)
    assert starts.first["0@1000"] == (1000.0, 1000.25) and starts.duplicated() == 1


def test_a_process_tree_has_cpu_and_a_missing_one_none() -> None:
    assert tree_cpu_seconds(os.getpid()) > 0
    assert tree_cpu_seconds(2**22 + 1) == 0.0


def test_each_second_first_and_last_start() -> None:
    runs = [(d, d + late, d + late) for d in (10.0, 11.0, 12.0) for late in (0.1, 0.2, 0.6)]
    assert _each_second(runs, after_s=11.0) == {
        "each_second_first_start_p50_s": 0.1,
        "each_second_last_start_p50_s": 0.6,
    }
    assert _each_second(runs, after_s=20.0) == {}


def test_the_late_seconds_are_named_with_their_p99() -> None:
    lateness = {f"e{s}-{i}": (s + 0.5, 0.2) for s in range(30) for i in range(100)}
    for i in range(100):  # every run due in seconds 15 and 29 is late
        lateness[f"e15-{i}"] = (15.0, 1.4)
        lateness[f"e29-{i}"] = (29.9, 2.0)
    assert late_seconds(lateness) == [[15, 1.4], [29, 2.0]]
    assert late_seconds({}) == []


def test_late_runs_are_counted_by_their_job_and_executions_partition() -> None:
    settings = KadenceSettings(partitions=12, execution_partitions=6)
    jobs = {f"e{i}": ("acme", f"job-{i}") for i in range(40)}
    late = {f"e{i}": 0.3 for i in range(40)}  # on time: not counted
    stalled = [e for e, (t, j) in jobs.items() if partition_for(routing_key(t, j, None), 12) == 5]
    assert stalled
    for eid in stalled:
        late[eid] = 4.0
    late["unknown"] = 9.0  # no outcome read for it: not counted
    found = late_by_partition(late, jobs, settings)
    assert found["job"] == {5: len(stalled)}
    acme = partition_for(execution_route("acme", "x", {}), 6)  # one tenant: one partition
    assert found["executions"] == {acme: len(stalled)}


def test_an_inbox_bound_the_setting_refuses_is_refused_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        sustained_main(["--inbox", "5", "--rates", "100"])
    assert "--inbox:" in capsys.readouterr().err
