"""bench.sustained's line per rate (bench/headline.py, issue 44 item 6): on time or not, CPU per
execution by process, records per execution by topic. No broker: rows as a run writes them."""

from __future__ import annotations

from typing import Any

from bench.headline import cpu_part, headline, records_part


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
