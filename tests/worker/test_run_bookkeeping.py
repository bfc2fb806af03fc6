"""The worker's deadline heap and its periodic run summary, on their own."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from kadence.clock import ms_to_datetime
from kadence.models import ExecutionRequested, KafkaTarget
from kadence.targets import Stop
from streams.worker.active import ActiveRun
from streams.worker.deadlines import Deadlines, Due
from streams.worker.inbox import Item
from streams.worker.summary import RunSummary

T0 = 1_796_112_000_000


def run(i: int) -> ActiveRun:
    due = ms_to_datetime(T0)
    ex = ExecutionRequested(
        execution_id=f"acme/j{i}@x",
        tenant="acme",
        job_id=f"j{i}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic="t"),
        timeout_ms=60_000,
        lease_ttl_ms=3_000,
    )
    return ActiveRun(Item(0, i, ex, T0), Stop(), T0, T0 + 3_000, T0 + 1_000)


def test_deadlines_come_out_in_time_order_and_only_once_due() -> None:
    deadlines = Deadlines()
    a, b = run(1), run(2)
    deadlines.started(a)
    deadlines.started(b)
    assert list(deadlines.due(T0 + 999)) == []
    assert list(deadlines.due(T0 + 1_000)) == [(Due.renew, a), (Due.renew, b)]
    a.next_renew_ms, a.lease_expires_ms = T0 + 2_000, T0 + 4_000
    deadlines.renewed(a)
    assert list(deadlines.due(T0 + 3_000)) == [(Due.renew, a), (Due.expire, a), (Due.expire, b)]
    assert [d for d, _ in deadlines.due(T0 + 60_000)] == [Due.expire, Due.timeout, Due.timeout]
    assert len(deadlines) == 0


def test_the_entries_of_ended_runs_are_dropped_once_they_pile_up() -> None:
    deadlines = Deadlines()
    runs = [run(i) for i in range(1_000)]
    for r in runs:
        deadlines.started(r)
    live = set(runs[:10])
    deadlines.forget_ended(lambda r: r in live)
    assert len(deadlines) == 30  # 3 000 entries were over the limit: ended runs' went
    deadlines.forget_ended(lambda r: False)
    assert len(deadlines) == 30  # under the limit now: left until they pile up again


def test_the_summary_gives_the_window_s_counts_and_lateness(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "streams.worker.summary")
    summary = RunSummary(T0)
    for lateness in [0.01] * 98 + [0.5, 2.0]:
        summary.started(lateness)
    summary.finished("succeeded")
    summary.finished("failed")
    summary.finished("succeeded")
    summary.tick(T0 + 9_999, in_flight=97)
    assert caplog.records == []
    summary.tick(T0 + 10_000, in_flight=97)
    [line] = [r.getMessage() for r in caplog.records]
    assert line == (
        "runs in the last 10 s: 100 started (start lateness p50 0.010 s, p99 2.000 s), "
        "3 finished (failed 1, succeeded 2); 97 in flight"
    )
    summary.tick(T0 + 20_000, in_flight=0)  # an idle window says nothing
    assert len(caplog.records) == 1


def test_a_transaction_s_runs_counted_at_once_read_as_counted_one_by_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "streams.worker.summary")
    one_by_one, at_once = RunSummary(T0), RunSummary(T0)
    transactions = [[0.01, 0.02, 0.02], [1.5], [0.0, 3.0]]
    for lateness in transactions:
        for value in lateness:
            one_by_one.started(value)
            one_by_one.finished("succeeded")
        at_once.started_all(lateness)
        at_once.finished("succeeded", len(lateness))
    at_once.finished("failed", 1)
    one_by_one.finished("failed")
    one_by_one.tick(T0 + 10_000, in_flight=0)
    at_once.tick(T0 + 10_000, in_flight=0)
    first, second = (r.getMessage() for r in caplog.records)
    assert first == second
    assert "6 started" in first and "7 finished (failed 1, succeeded 6)" in first
