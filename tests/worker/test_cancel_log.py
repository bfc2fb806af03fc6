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


def revocation(reason: str) -> ExecutionRevoked:
    due = ms_to_datetime(T0)
    return ExecutionRevoked(
        execution_id="acme/j1@x",
        tenant="acme",
        job_id="j1",
        definition_version=1,
        due_at=due,
        revoked_at=due - timedelta(seconds=1),
        reason=reason,
    )


def worker_running(stop: Stop, at: int) -> SimpleNamespace:
    """A worker whose run of acme/j1@x was read at executions[0]@`at`."""
    return SimpleNamespace(
        inbox=SimpleNamespace(
            read=lambda partition, offset: None, revoke=lambda record, partition, offset: False
        ),
        runs={
            "acme/j1@x": SimpleNamespace(stop=stop, item=SimpleNamespace(partition=0, offset=at))
        },
        holdings=SimpleNamespace(revoke=lambda record, partition, offset: None),
    )


def test_a_cancel_reason_cannot_forge_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    revoked = revocation(FORGED)
    stop = Stop()
    worker = worker_running(stop, 0)
    caplog.set_level(logging.INFO, "streams.worker.loop")
    Worker._take(worker, revoked, 0, 1, None)  # type: ignore[arg-type]
    assert stop.is_set()
    [line] = [r.getMessage() for r in caplog.records if "cancelling" in r.getMessage()]
    assert "\n" not in line and "\r" not in line
    assert "admin token rotated" in line  # still there to read, escaped


def test_a_revocation_read_again_does_not_stop_a_run_read_after_it() -> None:
    """A take-over reads old revocations again: the run of the same execution read after one
    (dispatched again once its job resumed) goes on."""
    stop = Stop()
    Worker._take(worker_running(stop, 5), revocation("paused"), 0, 3, None)  # type: ignore[arg-type]
    assert not stop.is_set()
    Worker._take(worker_running(stop, 5), revocation("cancelled"), 0, 6, None)  # type: ignore[arg-type]
    assert stop.is_set()
