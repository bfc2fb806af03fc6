"""In-process handlers: registered by name, exceptions become outcomes."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from connectors import handlers
from connectors.base import Result, Stop
from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def run(name: str) -> Result:
    ex = ExecutionRequested(
        execution_id="acme/j@2026-12-01T09:00:00.000Z",
        tenant="acme",
        job_id="j",
        definition_version=1,
        nominal_at=T,
        due_at=T,
        dispatched_at=T,
        target=HandlerTarget(name=name),
        timeout_ms=1_000,
        lease_ttl_ms=3_000,
    )
    return handlers.call(ex, Stop(), time.monotonic() + 1)


@handlers.handler("test-ok")
def _ok(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    return None


@handlers.handler("test-retry")
def _retry(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    raise handlers.RetryableError("upstream busy")


@handlers.handler("test-bug")
def _bug(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    raise ValueError("bad input")


def test_a_handler_returning_nothing_succeeded() -> None:
    assert run("test-ok").status is OutcomeStatus.succeeded


def test_exceptions_fail_retryably_only_when_asked() -> None:
    retry, bug = run("test-retry"), run("test-bug")
    assert (retry.status, retry.retryable) == (OutcomeStatus.failed, True)
    assert (bug.status, bug.retryable) == (OutcomeStatus.failed, False)
    assert bug.error is not None
    assert (bug.error.type, bug.error.message) == ("ValueError", "bad input")


def test_an_unknown_handler_names_the_registered_ones() -> None:
    result = run("nope")
    assert result.error is not None
    assert "no handler 'nope'" in result.error.message
    assert "test-ok" in result.error.message
