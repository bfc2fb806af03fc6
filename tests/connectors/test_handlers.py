"""In-process handlers: registered by name, exceptions become outcomes."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from connectors import handlers
from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus
from kadence.targets import Result, Stop

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def run(name: str, tenant: str = "acme") -> Result:
    ex = ExecutionRequested(
        execution_id=f"{tenant}/j@2026-12-01T09:00:00.000Z",
        tenant=tenant,
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


@handlers.handler("test-ok", tenants=["acme"])
def _ok(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    return None


@handlers.handler("test-retry", tenants="acme")
def _retry(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    raise handlers.RetryableError("upstream busy")


@handlers.handler("test-bug", tenants="*")
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


def test_an_unknown_handler_names_no_other_handler() -> None:
    result = run("nope")
    assert result.error is not None
    assert result.error.type == "UnknownHandler"
    assert result.error.message == "handler 'nope' is unknown for tenant 'acme' in this worker"


def test_a_handler_serves_only_the_tenants_it_names() -> None:
    assert run("test-ok", "globex").status is OutcomeStatus.failed
    assert run("test-bug", "globex").retryable is False  # shared: it ran (and raised)


def test_a_tenants_own_handler_wins_over_a_shared_one() -> None:
    handlers.handler("test-both", tenants="*")(
        lambda _ex, _stop: Result.failed("x", "shared", retryable=False)
    )
    handlers.handler("test-both", tenants="acme")(lambda _ex, _stop: None)
    assert run("test-both", "acme").status is OutcomeStatus.succeeded
    assert run("test-both", "globex").status is OutcomeStatus.failed


@pytest.mark.parametrize("tenants", [None, [], ["has space"], ["acme\n"]])
def test_a_handler_must_name_valid_tenants(tenants: list[str] | None) -> None:
    with pytest.raises(handlers.HandlerScopeError, match=r'tenants="\*"'):
        handlers.handler("test-unscoped", tenants=tenants)
