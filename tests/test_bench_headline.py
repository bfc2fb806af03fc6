"""bench.sustained's line per rate (bench/headline.py, issue 44 item 6): on time or not, CPU per
execution by process and by kind of work, records per execution by topic. No broker: rows as a
run writes them, and the per-execution figures by work as bench/cpu.py makes them from two
scrapes of the processes' `kadence_work_cpu_seconds_total`."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from bench import sustained
from bench.cpu import lag_records, work_per_execution_us, work_seconds
from bench.headline import cpu_part, headline, records_part, work_part
from bench.stack import INBOX_FULL, Stack
from bench.sustained import SteadyCpu, behind_summary
from kadence.metrics import LagCollector, LagTracker
from kadence.settings import KadenceSettings


def row(**kw: Any) -> dict[str, Any]:
    """A row as bench.sustained wrote it at 3 000/s on 2026-12-05 (AMD EPYC, a6e7c4e)."""
    base: dict[str, Any] = {
        "rate_per_s": 3000,
        "completed_per_s": 3027.7,
        "lost": 0,
        "p99_after_warm_up_s": 0.816,
        "visible_p99_after_warm_up_s": 0.816,
        "cpu_us_per_execution": {
            "scheduler": 212,
            "reaper": 5,
            "workers": 140,
            "broker": 87,
            "total": 444,
        },
        "written_per_execution": {
            "executions": {"records": 1.0, "bytes": 411},
            "history": {"records": 0.063, "bytes": 20},
            "outcomes": {"records": 1.0, "bytes": 422},
            "scheduler-changelog": {"records": 1.223, "bytes": 568},
            "to.<tenant>.<topic>": {"records": 1.0, "bytes": 458},
            "all": {"records": 4.298, "bytes": 1881},
        },
        "on_time": True,
    }
    return {**base, **kw}


def test_the_line_says_the_verdict_the_cpu_by_process_and_the_records_by_topic() -> None:
    assert headline(row()) == (
        "3000/s on time: visible p99 0.816 s, 3 028/s done"
        " | CPU µs/exec: scheduler 212, workers 140, broker 87, reaper 5 = 444"
        " | records/exec: scheduler-changelog 1.2, executions 1, outcomes 1,"
        " to.<tenant>.<topic> 1, history 0.063 = 4.3 (1 881 B)"
    )


def test_a_late_or_lossy_rate_says_so_first() -> None:
    line = headline(row(on_time=False, lost=12, visible_p99_after_warm_up_s=7.8))
    assert line.startswith("3000/s NOT on time: visible p99 7.8 s, 3 028/s done, 12 LOST")


def test_runs_the_missed_run_policy_skipped_are_told_apart_from_lost_ones() -> None:
    behind = row(on_time=False, skipped_late=4321, lost=0, visible_p99_after_warm_up_s=31.2)
    line = headline(behind)
    assert line.startswith(
        "3000/s NOT on time: visible p99 31.2 s, 3 028/s done, 4 321 skipped late (missed-run "
        "policy) | CPU"
    )
    both = headline({**behind, "lost": 7})
    assert ", 4 321 skipped late (missed-run policy), 7 LOST |" in both


def test_without_a_reader_or_a_count_the_line_says_what_it_has() -> None:
    bare = row()
    del bare["visible_p99_after_warm_up_s"], bare["written_per_execution"]
    line = headline(bare)
    assert line.startswith("3000/s on time: p99 0.816 s")
    assert "records/exec" not in line and "CPU µs/exec" in line


def test_processes_keep_their_order_and_others_follow() -> None:
    assert cpu_part({"broker": 1, "ingress": 3, "scheduler": 2, "total": 6}) == (
        "scheduler 2, broker 1, ingress 3 = 6"
    )
    assert records_part({"b": {"records": 1.0, "bytes": 9}}) == "b 1"


BY_WORK: dict[str, dict[str, Any]] = {  # as bench/cpu.py writes it (µs per execution)
    "workers": {"deliver": 36, "read": 29, "commit": 0, "other threads": 40},
    "scheduler": {"outcomes": 61, "fire": 49, "other threads": 24},
}


def test_the_cpu_by_work_follows_the_processes_each_kind_most_first_other_threads_last() -> None:
    line = headline(row(cpu_us_per_execution_by_work=BY_WORK))
    assert (
        " | CPU µs/exec: scheduler 212, workers 140, broker 87, reaper 5 = 444"
        " | CPU µs/exec by work: scheduler outcomes 61, fire 49, other threads 24;"
        " workers deliver 36, read 29, other threads 40 | records/exec: "
    ) in line
    assert "commit" not in line  # under half a microsecond: in the row, not the line
    assert "by work" not in headline(row(cpu_us_per_execution_by_work={}))  # not measured


def test_a_process_the_order_does_not_name_follows_and_one_without_kinds_is_left_out() -> None:
    by_work: dict[str, dict[str, Any]] = {
        "ingress": {"poll": 2},
        "reaper": {},
        "scheduler": {"fire": 1.4, "poll": 3},
    }
    assert work_part(by_work) == "scheduler poll 3, fire 1; ingress poll 2"


def test_the_kinds_per_execution_are_what_each_loop_charged_between_the_two_scrapes() -> None:
    before = {"scheduler": {"outcomes": 1.0, "fire": 2.0}, "workers": {"read": 0.5}}
    after = {
        "scheduler": {"outcomes": 1.61, "fire": 2.49, "commit": 0.1},  # a kind new since
        "workers": {"read": 0.79},
    }
    cpu_us = {"scheduler": 212, "workers": None, "broker": 87}
    got = work_per_execution_us(before, after, 10_000, cpu_us)
    assert got == {
        "scheduler": {"outcomes": 61, "fire": 49, "commit": 10, "other threads": 92},
        "workers": {"read": 29},  # its CPU unknown: no other threads
    }
    assert list(got["scheduler"]) == ["outcomes", "fire", "commit", "other threads"]
    assert work_per_execution_us(before, after, 0, cpu_us) == {}


def test_the_collector_s_share_is_shown_apart_and_not_added_to_the_kinds() -> None:
    before = {"workers": {"read": 0.5, "collector": 0.25}}
    after = {"workers": {"read": 0.79, "claim": 0.1, "collector": 0.35}}
    got = work_per_execution_us(before, after, 10_000, {"workers": 60})
    assert got == {"workers": {"read": 29, "claim": 10, "other threads": 21, "collector": 10}}
    assert list(got["workers"])[-2:] == ["other threads", "collector"]
    assert (
        work_part(got) == "workers read 29, claim 10, other threads 21 (of which the collector 10)"
    )


def exposition() -> bytes:
    """A process's metrics as prometheus_client serves them: the loop's kinds among others."""
    registry = CollectorRegistry()
    work = Counter("kadence_work_cpu_seconds", "loop CPU", ["work"], registry=registry)
    work.labels("commit").inc(1.5)
    work.labels("scheduler-control").inc(0.25)
    Counter("kadence_worker_lease_renewals", "renewals", registry=registry).inc(3)
    spent = Counter("kadence_gc_seconds", "collector", ["generation"], registry=registry)
    spent.labels("0").inc(0.5)
    spent.labels("2").inc(0.25)
    lag = LagTracker("kadence-ns-scheduler")  # as a scheduler serves it
    lag.per_topic = {"ns.outcomes": 1234, "ns.commands": 0}
    registry.register(LagCollector(lag))
    return generate_latest(registry)


class Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(exposition())

    def log_message(self, *_args: Any) -> None:
        pass


def test_a_process_kinds_are_read_from_its_metrics_and_none_when_it_does_not_answer() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        got = work_seconds(port)
        assert got == {"commit": 1.5, "scheduler-control": 0.25, "collector": 0.75}
        assert lag_records(port) == {"ns.outcomes": 1234, "ns.commands": 0}
    finally:
        server.shutdown()
        server.server_close()
    assert work_seconds(port, timeout_s=1) == {}  # nobody listens there now
    assert lag_records(port, timeout_s=1) == {}


def test_outcomes_a_scheduler_left_for_after_the_window_are_said() -> None:
    """Their CPU is not in the window's figures: a rate whose scheduler fell behind on outcomes
    looks cheaper than it is (10 000/s on 2026-12-06: outcomes 11 µs an execution against
    21-37 at 6 000-9 000/s)."""
    line = headline(row(scheduler_behind_at_end={"outcomes": 4321, "commands": 0}))
    assert "3 028/s done, the scheduler 4 321 outcome records behind at the window's end |" in line
    assert "behind" not in headline(row(scheduler_behind_at_end={"outcomes": 0}))
    during = {"scheduler_outcomes_behind_in_window": {"max": 5210, "mean": 1402}}
    line = headline(row(scheduler_behind_at_end={"outcomes": 4321}, **during))
    assert (
        "4 321 outcome records behind at the window's end"
        " (5 210 at most in the window, 1 402 on average) |" in line
    )
    assert "at most" not in headline(row(scheduler_outcomes_behind_in_window={}))
    assert "behind" not in headline(row())


def test_the_bench_own_readers_are_shown_apart_and_not_in_the_total() -> None:
    """The outcome reader and the visible watcher run on the same cores as the stack: their CPU
    is said, after the stack's, and not added to it."""
    own = {"outcome reader": 21, "visible watcher": 9}
    line = headline(row(bench_cpu_us_per_execution=own))
    assert (
        " | CPU µs/exec: scheduler 212, workers 140, broker 87, reaper 5 = 444"
        " | the bench's own CPU µs/exec: outcome reader 21, visible watcher 9 | records/exec: "
    ) in line
    assert "bench's own" not in headline(row(bench_cpu_us_per_execution={}))  # not measured


def test_a_worker_that_stopped_reading_with_its_inbox_full_is_said() -> None:
    """Runs due soon wait behind what a full worker holds: the knee is then the inbox bound's
    (at 8 000/s the worker of partitions 6-11 carried 65 % of B2's 20 tenants)."""
    line = headline(row(inbox_full={"w0": 0, "w1": 38}))
    assert "3 028/s done, a worker's inbox full 38 times (reading paused) |" in line
    assert "inbox" not in headline(row(inbox_full={"w0": 0, "w1": 0}))


def test_a_worker_pauses_are_counted_in_its_own_log(tmp_path: Path) -> None:
    """bench.stack reads each worker's log for the line its inbox writes when full."""
    stack = Stack(KadenceSettings(), tmp_path, workers=2)
    line = "INFO streams.worker.backlog inbox full (100000 executions, 15062034 bytes)"
    (tmp_path / "w1.log").write_text(
        f"{line}{INBOX_FULL}\nINFO inbox down to 74200 executions: reading resumed\n"
        f"{line}{INBOX_FULL}\nINFO inbox full: 12 executions of tenants at their cap let go\n"
    )
    assert stack.inbox_pauses() == {"w0": 0, "w1": 2}


def test_the_window_samples_how_far_behind_the_outcomes_are() -> None:
    """B2 reads the schedulers' outcome lag every few seconds of the window (`behind_every_s`),
    not only at its end: the lag that takes tenants to their in-flight cap shows as it grows."""

    class Stack:
        lags = iter([700, 2100, 1400, 900, 500])

        def cpu_s(self) -> dict[str, float]:
            return {"scheduler": 1.0}

        def work_s(self) -> dict[str, dict[str, float]]:
            return {}

        def schedulers_behind(self) -> dict[str, int]:
            return {"outcomes": next(self.lags, 0), "schedules": 3}

    start = time.time()  # a window of 1 s sampled every 0.05 s: 2 samples even on a busy CPU
    cpu = SteadyCpu(Stack(), start, start + 1.0, rate=10, behind_every_s=0.05)  # type: ignore[arg-type]
    cpu.start()
    cpu._thread.join(10)
    assert not cpu._thread.is_alive()
    assert cpu.behind_samples[:2] == [700, 2100]  # sampled in the window, in order
    assert cpu.behind_in_window()["max"] == 2100
    assert behind_summary([]) == {}
    assert behind_summary([100, 200, 600]) == {"max": 600, "mean": 300}


def test_stagger_makes_the_jobs_a_slice_a_second(monkeypatch: Any) -> None:
    """`--stagger S` writes every job once, in S slices a second apart (jobs made over time
    fill their look-ahead at different instants), and 0 writes them all at once."""
    written: list[tuple[float, list[str]]] = []
    monkeypatch.setattr(
        sustained, "load", lambda _s, defs: written.append((time.monotonic(), list(defs)))
    )
    defs: list[Any] = [f"d{i}" for i in range(10)]  # what `load` is given, as they are
    sustained.load_staggered(None, defs, 3)  # type: ignore[arg-type]
    assert sorted(d for _, ds in written for d in ds) == sorted(f"d{i}" for i in range(10))
    assert [len(ds) for _, ds in written] == [4, 3, 3]
    assert written[2][0] - written[0][0] >= 1.9  # a second apart
    written.clear()
    two: list[Any] = ["a", "b"]
    sustained.load_staggered(None, two, 0)  # type: ignore[arg-type]
    assert [ds for _, ds in written] == [["a", "b"]]


@pytest.mark.parametrize("bad", ["-1", "-20", "3601", "1.5", "soon"])
def test_stagger_refuses_what_would_start_the_window_wrong(bad: str, capsys: Any) -> None:
    """A negative `--stagger` would move the window's start into the past, and a huge one
    would wait for hours: the parser refuses both, and anything not a whole number, by name."""
    with pytest.raises(SystemExit) as exc:
        sustained._parser().parse_args(["--stagger", bad])
    assert exc.value.code == 2
    assert "--stagger" in capsys.readouterr().err
    assert sustained._parser().parse_args(["--stagger", "15"]).stagger == 15
    assert sustained._parser().parse_args([]).stagger == 0
