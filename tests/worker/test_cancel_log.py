"""Issue 28, item 7: a CancelRun's reason is the caller's text. The worker logs it when it stops
the run; a newline in it must not start a line of its own (a forged log entry)."""

from __future__ import annotations

import logging
from datetime import timedelta
from types import SimpleNamespace

import pytest

from kadence.clock import ms_to_datetime
from kadence.models import ExecutionRevoked
from kadence.targets import Stop
from streams.worker.loop import Worker

T0 = 1_796_112_000_000
FORGED = "bye\n2026-12-01 09:00:00,000 INFO streams.worker.loop admin token rotated"


def test_a_cancel_reason_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    due = ms_to_datetime(T0)
    revoked = ExecutionRevoked(
        execution_id="acme/j1@x",
        tenant="acme",
        job_id="j1",
        definition_version=1,
        due_at=due,
        revoked_at=due - timedelta(seconds=1),
        reason=FORGED,
    )
    stop = Stop()
    worker = SimpleNamespace(
        inbox=SimpleNamespace(
            read=lambda partition, offset: None, revoke=lambda record, partition, offset: False
        ),
        runs={"acme/j1@x": SimpleNamespace(stop=stop)},
        holdings=SimpleNamespace(revoke=lambda record: None),
    )
    caplog.set_level(logging.INFO, "streams.worker.loop")
    Worker._take(worker, revoked, 0, 0, None)  # type: ignore[arg-type]
    assert stop.is_set()
    [line] = [r.getMessage() for r in caplog.records if "cancelling" in r.getMessage()]
    assert "\n" not in line and "\r" not in line
    assert "admin token rotated" in line  # still there to read, escaped
