"""A `fired` record for a series of runs (kadence/fired_series.py): read back as each run's own
record; anything malformed or out of bounds in it is read as the one run it names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kadence.fired_series import MAX_RUNS, runs_of
from kadence.models import Decision, HistoryRecord
from kadence.timeengine.identity import execution_id

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)


def series(**details: str) -> HistoryRecord:
    return HistoryRecord(
        tenant="acme",
        job_id="tick",
        decision=Decision.fired,
        at=T0 - timedelta(seconds=20),
        execution_id=execution_id("acme/tick", T0_MS),
        nominal_at=T0,
        due_at=T0 + timedelta(milliseconds=250),
        attempt=1,
        details={"trigger": "schedule", "lateness_ms": "0", "ahead_ms": "20250", **details},
    )


def test_a_series_is_each_run_in_order() -> None:
    runs = runs_of(series(runs="3", step_ms="60000"))
    assert [r.execution_id for r in runs] == [
        execution_id("acme/tick", T0_MS + i * 60_000) for i in range(3)
    ]
    assert [(r.nominal_at, r.due_at) for r in runs] == [
        (T0 + timedelta(minutes=i), T0 + timedelta(minutes=i, milliseconds=250)) for i in range(3)
    ]
    assert [r.details["ahead_ms"] for r in runs] == ["20250", "80250", "140250"]
    assert all("runs" not in r.details and "step_ms" not in r.details for r in runs)
    assert {r.at for r in runs} == {T0 - timedelta(seconds=20)}


@pytest.mark.parametrize(
    "details",
    [
        {},  # one run, as every record before series
        {"runs": "1", "step_ms": "1000"},
        {"runs": str(MAX_RUNS + 1), "step_ms": "1000"},  # more than one step ever fires
        {"runs": "1000000000", "step_ms": "1"},
        {"runs": "3", "step_ms": "0"},
        {"runs": "3", "step_ms": "-1000"},
        {"runs": "3"},
        {"runs": "three", "step_ms": "1000"},
        {"runs": "3", "step_ms": "1e3"},
        {"runs": "3", "step_ms": "1000", "ahead_ms": "soon"},
    ],
)
def test_a_record_that_is_no_well_formed_series_is_the_one_run_it_names(
    details: dict[str, str],
) -> None:
    record = series(**details)
    assert runs_of(record) == [record]


def test_only_a_fired_record_of_the_job_s_own_id_is_a_series() -> None:
    other = series(runs="3", step_ms="1000").model_copy(
        update={"execution_id": execution_id("acme/other", T0_MS)}
    )
    manual = series(runs="3", step_ms="1000").model_copy(
        update={"execution_id": "acme/tick@manual:r1"}
    )
    skipped = series(runs="3", step_ms="1000").model_copy(
        update={"decision": Decision.skipped_paused}
    )
    for record in (other, manual, skipped):
        assert runs_of(record) == [record]
