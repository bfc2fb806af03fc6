"""HTTP runs and async handlers on the worker's event loop (connectors/aio.py): no pool thread,
no slot, so hundreds are in flight at once against a slow target (64 threads could not), still
listed in the lease snapshot, bounded by `worker_async_max_in_flight` (past it they wait), and
stopped at once by a cancel, a timeout or a lost lease. Driver workers, a real loopback HTTP
server; assertions on what the server saw, not on how long the test took."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from connectors.aio import EventLoop
from connectors.handlers import HandlerCaller, handler
from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.clock import ms_to_datetime
from kadence.models import (
    ExecutionOutcome,
    ExecutionRequested,
    HandlerTarget,
    HttpTarget,
    OutcomeStatus,
)
from kadence.models.targets import Target
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from kadence.topics import OUTCOMES, Topics
from streams.worker.loop import Worker
from testkit.driver import START_MS, Driver, abort_error
from testkit.driver.leases import snapshots
from testkit.outcomes import revocation_of
from testkit.target_server import TargetServer

TTL_MS = 30_000
TURNS = 100_000
"""Enough turns for any wait: `wait_s` bounds them (a loaded machine turns fast and slowly
answers)."""


@pytest.fixture
def settings() -> KadenceSettings:
    return KadenceSettings(namespace="drv", partitions=2, execution_partitions=2)


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    return driver.provision(settings)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    srv = TargetServer(keep_alive=True).start()
    yield srv
    srv.gate.set()
    srv.stop()


def execution(
    i: int, target: Target, *, tenant: str = "acme", timeout_ms: int = 600_000
) -> ExecutionRequested:
    due = ms_to_datetime(START_MS)
    return ExecutionRequested(
        execution_id=f"{tenant}/j{i}@2026-12-01T08:00:00.000Z",
        tenant=tenant,
        job_id=f"j{i}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=target,
        timeout_ms=timeout_ms,
        lease_ttl_ms=TTL_MS,
    )


def send(driver: Driver, topics: Topics, *executions: ExecutionRequested) -> None:
    for n, ex in enumerate(executions):
        driver.send(topics.executions, ex, key=ex.routing_key, partition=n % 2)


def outcomes(driver: Driver, topics: Topics) -> list[ExecutionOutcome]:
    found = driver.records(topics.outcomes, OUTCOMES)
    return [o for o in found if isinstance(o, ExecutionOutcome)]


def http(loop: EventLoop | None = None) -> HttpCaller:
    return HttpCaller(AddressPolicy(["127.0.0.0/8"]), {}, loop=loop)


def test_500_http_runs_against_a_held_target_are_all_in_flight_at_once(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    """The receiver holds every request until all 500 have arrived: with 64 slots only 64
    could ever arrive (each waits for its answer); on the event loop all 500 are in flight at
    once, none takes a slot, and one lease snapshot lists them all. (Held by the receiver,
    not timed: a loaded machine only makes them arrive later.)"""
    worker = driver.worker(settings, {"http": http()})
    server.gate.clear()
    runs = [execution(i, HttpTarget(url=f"{server.url}/slow?s=0&gated=1")) for i in range(500)]
    send(driver, topics, *runs)
    driver.turn_until(lambda: len(worker.runs) == 500, worker, turns=TURNS, wait_s=60)
    assert worker.inflight.running == 0  # no slot taken
    assert all(not run.pooled for run in worker.runs.values())
    [*_, snap] = snapshots(driver.cluster, topics)
    assert sum(r.count for r in snap.held) == 500  # each one listed under the lease
    driver.turn_until(
        lambda: len(server.seen("/slow")) == 500, worker, turns=TURNS, wait_s=120
    )  # all 500 at the receiver, none answered yet
    assert outcomes(driver, topics) == []
    assert all(h.done == 0.0 for h in server.seen("/slow"))  # held, all at once
    server.gate.set()
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 500, worker, turns=TURNS, wait_s=120)
    assert {o.status for o in outcomes(driver, topics)} == {OutcomeStatus.succeeded}


def test_past_the_async_bound_runs_wait_and_a_tenant_holds_its_share(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    bounded = settings.model_copy(update={"worker_async_max_in_flight": 10})
    worker = driver.worker(bounded, {"http": http()})
    server.gate.clear()
    gated = HttpTarget(url=f"{server.url}/gate?gated=1")
    flood = [execution(i, gated) for i in range(30)]
    send(driver, topics, *flood, execution(0, HttpTarget(url=f"{server.url}/ok"), tenant="small"))
    driver.turn_until(lambda: len(server.seen()) >= 6, worker, turns=TURNS, wait_s=30)
    driver.turn(worker, times=20)
    assert len(server.seen("/gate")) == 5  # acme: half of the 10 (the default share)
    assert len(server.seen("/ok")) == 1  # the other tenant ran
    server.gate.set()
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 31, worker, turns=TURNS, wait_s=60)
    assert {o.status for o in outcomes(driver, topics)} == {OutcomeStatus.succeeded}
    assert len(server.seen("/gate")) == 30  # none lost


def run_of(worker: Worker, ex: ExecutionRequested) -> Result:
    run = worker.runs[ex.execution_id]
    assert run.future is not None
    return run.future.result(timeout=10)  # /hang never answers: only the stop ends it


def test_a_lost_lease_aborts_the_request_at_once(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    worker = driver.worker(settings, {"http": http()})
    ex = execution(1, HttpTarget(url=f"{server.url}/hang"))
    send(driver, topics, ex)
    driver.turn_until(lambda: len(server.seen("/hang")) == 1, worker, turns=TURNS, wait_s=30)
    driver.cluster.faults.fail("commit_transaction", abort_error(), times=1_000)
    driver.advance(TTL_MS)  # no renewal commits: the lease runs out
    driver.turn(worker)
    assert run_of(worker, ex).status is OutcomeStatus.lease_lost
    driver.cluster.faults.clear()


def test_a_cancel_aborts_the_request_at_once(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    worker = driver.worker(settings, {"http": http()})
    ex = execution(1, HttpTarget(url=f"{server.url}/hang"))
    send(driver, topics, ex)
    driver.turn_until(lambda: len(server.seen("/hang")) == 1, worker, turns=TURNS, wait_s=30)
    revoke = revocation_of(ex, reason="test")
    driver.send(topics.executions, revoke, key=ex.routing_key, partition=0)
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 1, worker, turns=TURNS, wait_s=30)
    assert [o.status for o in outcomes(driver, topics)] == [OutcomeStatus.cancelled]


def test_the_run_s_timeout_aborts_the_request(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    worker = driver.worker(settings, {"http": http()})
    ex = execution(1, HttpTarget(url=f"{server.url}/hang"), timeout_ms=500)
    send(driver, topics, ex)
    driver.turn_until(lambda: len(server.seen("/hang")) == 1, worker, turns=TURNS, wait_s=30)
    result = run_of(worker, ex)  # the request's own deadline, in real time
    assert result.status is OutcomeStatus.timed_out
    assert result.error is not None and result.error.type == "Timeout"


PARKED = threading.Event()
RAN_ON: list[str] = []


@handler("test-async-sleep", tenants=["acme"])
async def _sleep(_ex: ExecutionRequested, _stop: Stop) -> Result | None:
    RAN_ON.append(threading.current_thread().name)
    await asyncio.sleep(0.5)
    return None


@handler("test-sync-parked", tenants=["acme"])
def _parked(_ex: ExecutionRequested, stop: Stop) -> Result | None:
    stop.on_stop(PARKED.set)
    PARKED.wait(60)
    return None


def test_async_handlers_run_without_a_pool_thread_while_the_only_slot_is_taken(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    one = settings.model_copy(update={"worker_concurrency": 1, "worker_tenant_max_share": 1.0})
    loop = EventLoop("test-handlers")
    worker = driver.worker(one, {"handler": HandlerCaller(loop)})
    PARKED.clear()
    RAN_ON.clear()
    try:
        parked = execution(0, HandlerTarget(name="test-sync-parked"))
        send(driver, topics, parked)
        driver.turn_until(lambda: worker.inflight.running == 1, worker, turns=TURNS, wait_s=30)
        sleepers = [execution(i, HandlerTarget(name="test-async-sleep")) for i in range(1, 51)]
        send(driver, topics, *sleepers)
        driver.turn_until(
            lambda: len(outcomes(driver, topics)) == 50, worker, turns=TURNS, wait_s=60
        )
        assert {o.status for o in outcomes(driver, topics)} == {OutcomeStatus.succeeded}
        assert set(RAN_ON) == {"test-handlers"}  # the loop's thread, never the pool's
        assert worker.inflight.running == 1  # the sync one still holds the only slot
    finally:
        PARKED.set()
        loop.close()
