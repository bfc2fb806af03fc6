"""A destination's rate limit in the worker loop (kadence/throttle.py): driver workers
with a settable clock and a real loopback HTTP receiver. Runs over the limit start one per
interval of the driver's clock, in due order, while another destination of the tenant and
another tenant start at once; each outcome says how long it waited; a worker that dies while
runs wait leaves them to the next owner, each run called once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from connectors.http import HttpCaller
from connectors.ssrf import AddressPolicy
from kadence.clock import ms_to_datetime
from kadence.models import ExecutionOutcome, ExecutionRequested, HttpTarget, RateLimit
from kadence.settings import KadenceSettings
from kadence.topics import OUTCOMES, Topics
from streams.worker.loop import Worker
from testkit.driver import START_MS, Driver
from testkit.target_server import TargetServer

TURNS = 100_000
RUNS = 20
LIMIT = RateLimit(per_second=2)


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
    i: int, url: str, *, tenant: str = "acme", limit: RateLimit | None = LIMIT
) -> ExecutionRequested:
    due = ms_to_datetime(START_MS) + timedelta(milliseconds=i)  # due in this order
    return ExecutionRequested(
        execution_id=f"{tenant}/j{i}@2026-12-01T08:00:00.000Z",
        tenant=tenant,
        job_id=f"j{i}",
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=HttpTarget(url=url, rate_limit=limit),
        timeout_ms=1_000,  # far less than the wait: it runs from the start
        lease_ttl_ms=30_000,
    )


def worker(driver: Driver, settings: KadenceSettings, instance: str = "w0") -> Worker:
    caller = HttpCaller(AddressPolicy(["127.0.0.0/8"]), {})
    return driver.worker(settings, {"http": caller}, instance_id=instance)


def limited(driver: Driver, topics: Topics, server: TargetServer) -> list[ExecutionRequested]:
    runs = [execution(i, f"{server.url}/limited") for i in range(RUNS)]
    for ex in runs:  # one partition: the tenant's, as the topic is keyed
        driver.send(topics.executions, ex, key=ex.routing_key, partition=0)
    return runs


def ids(server: TargetServer, path: str) -> list[str]:
    return [h.headers["kadence-execution-id"] for h in server.seen(path)]


def reached(count: Callable[[], int], n: int) -> Callable[[], bool]:
    return lambda: count() >= n


def outcomes(driver: Driver, topics: Topics) -> list[ExecutionOutcome]:
    return [o for o in driver.records(topics.outcomes, OUTCOMES) if isinstance(o, ExecutionOutcome)]


def test_runs_over_the_limit_start_one_per_interval_and_nothing_else_waits(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    w = worker(driver, settings)
    runs = limited(driver, topics, server)
    other_dest = execution(100, f"{server.url}/other", limit=None)
    other_tenant = execution(101, f"{server.url}/limited", tenant="globex")  # its own limit
    for ex in (other_dest, other_tenant):
        driver.send(topics.executions, ex, key=ex.routing_key, partition=1)
    driver.advance(200)  # every run due
    driver.turn_until(lambda: len(server.seen()) == 3, w, turns=TURNS, wait_s=30)
    driver.turn(w, times=50)
    assert len(server.seen("/other")) == 1  # not behind the 19 waiting
    assert len(server.seen("/limited")) == 2  # acme's first and globex's first
    for n in range(1, RUNS):
        # each run ends before the clock moves on (the 1 s timeout is on the driver's clock)
        driver.turn_until(reached(lambda: len(outcomes(driver, topics)), 2 + n), w, turns=TURNS)
        driver.advance(500)  # 2 per second: one more per half second
        driver.turn_until(reached(lambda: len(server.seen("/limited")), 2 + n), w, turns=TURNS)
        driver.turn(w, times=10)
        assert len(server.seen("/limited")) == 2 + n  # and not more
    driver.turn_until(lambda: len(outcomes(driver, topics)) == RUNS + 2, w, turns=TURNS, wait_s=30)
    acme = [i for i in ids(server, "/limited") if i.startswith("acme/")]
    assert acme == [ex.execution_id for ex in runs]  # in due order, none lost or twice
    waited = {o.execution_id: o.throttled_ms for o in outcomes(driver, topics)}
    assert waited[runs[0].execution_id] == 0 and waited[other_dest.execution_id] == 0
    assert [waited[ex.execution_id] for ex in runs[1:]] == sorted(
        waited[ex.execution_id] for ex in runs[1:]
    )
    assert waited[runs[1].execution_id] > 0
    assert {o.status.value for o in outcomes(driver, topics)} == {"succeeded"}  # no timeout
    throttled = w.metrics.throttled_total.labels("acme")._value.get()
    assert throttled == RUNS - 1


def test_a_worker_dying_while_runs_wait_leaves_them_to_the_next_owner_each_called_once(
    driver: Driver, settings: KadenceSettings, topics: Topics, server: TargetServer
) -> None:
    first = worker(driver, settings, "w0")
    runs = limited(driver, topics, server)
    driver.advance(RUNS)
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 1, first, turns=TURNS, wait_s=30)
    for n in (2, 3):  # its 1 s timeout is on the driver's clock: each ends before it moves
        driver.advance(500)
        driver.turn_until(reached(lambda: len(server.seen("/limited")), n), first, turns=TURNS)
        driver.turn_until(reached(lambda: len(outcomes(driver, topics)), n), first, turns=TURNS)
    driver.turn(first, times=20)  # the offsets of the runs done are committed
    driver.crash(first)  # 17 runs were waiting for their start, none claimed
    second = worker(driver, settings, "w1")
    for n in range(3, RUNS):
        driver.turn_until(reached(lambda: len(server.seen("/limited")), n + 1), second, turns=TURNS)
        driver.turn_until(
            reached(lambda: len(outcomes(driver, topics)), n + 1), second, turns=TURNS
        )
        driver.advance(500)
    assert ids(server, "/limited") == [ex.execution_id for ex in runs]  # each once, in order
    assert {o.status.value for o in outcomes(driver, topics)} == {"succeeded"}
