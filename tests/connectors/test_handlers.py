"""In-process handlers: registered by name, exceptions become outcomes."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime

import pytest

from connectors import handlers
from kadence.models import ExecutionRequested, HandlerTarget, OutcomeStatus
from kadence.targets import Result, Stop

T = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def run(name: str, tenant: str = "acme") -> Result:
    return handlers.call(ex_of(name, tenant), Stop(), time.monotonic() + 1)


def ex_of(name: str, tenant: str = "acme") -> ExecutionRequested:
    return ExecutionRequested(
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


CANCELLED: list[str] = []


@handlers.handler("test-async-ok", tenants=["acme"])
async def _async_ok(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    await asyncio.sleep(0)
    return Result.failed("Said", threading.current_thread().name, retryable=False)


@handlers.handler("test-async-retry", tenants=["acme"])
async def _async_retry(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    raise handlers.RetryableError("later")


@handlers.handler("test-async-forever", tenants=["acme"])
async def _async_forever(ex: ExecutionRequested, _stop: Stop) -> Result | None:
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        CANCELLED.append(ex.execution_id)
        raise
    return None


def test_an_async_handler_starts_on_the_loop_and_a_sync_one_needs_the_pool() -> None:
    caller = handlers.HandlerCaller()
    assert caller.can_start(ex_of("test-async-ok"))
    assert not caller.can_start(ex_of("test-ok"))
    assert not caller.can_start(ex_of("nope"))
    assert caller.start(ex_of("test-ok"), Stop(), None) is None  # the worker uses its pool
    future = caller.start(ex_of("test-async-ok"), Stop(), None)
    assert future is not None
    result = future.result(timeout=10)
    assert result.error is not None and result.error.message == "handlers"  # the loop's thread
    retry = caller.start(ex_of("test-async-retry"), Stop(), None)
    assert retry is not None
    assert (retry.result(timeout=10).status, retry.result().retryable) == (
        OutcomeStatus.failed,
        True,
    )


def test_an_async_handler_called_the_blocking_way_still_runs() -> None:
    assert run("test-async-retry").retryable
    result = handlers.HandlerCaller()(ex_of("test-async-ok"), Stop(), time.monotonic() + 1)
    assert result.error is not None and result.error.type == "Said"


def test_a_stop_cancels_an_async_handler_at_once() -> None:
    stop = Stop()
    ex = ex_of("test-async-forever")
    future = handlers.HandlerCaller().start(ex, stop, None)
    assert future is not None
    time.sleep(0.1)
    assert not future.done()
    stop.set(OutcomeStatus.timed_out)
    assert future.result(timeout=10).status is OutcomeStatus.timed_out
    assert ex.execution_id in CANCELLED
