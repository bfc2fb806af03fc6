"""A finished run is freed by reference counting, not left to Python's collector: a target's
stop callback that closes over its stop, and the future whose done-callback names the run, are
cycles; thousands of them a second made a worker's collections take half a million objects and
a second's pause every dozen seconds (the tail of B2 at 5 000/s)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from kadence.models import ExecutionRequested
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from kadence.topics import Topics
from testkit.driver import Driver
from tests.driver.test_worker_loop import execution, outcomes, send, until


class Starting:
    """A target that starts without a thread, as the Kafka-topic target's claimed path does:
    its stop callback names the stop (a cycle until the run's stop lets go of it)."""

    def __init__(self) -> None:
        self.stops: list[weakref.ref[Stop]] = []

    def can_start(self, ex: ExecutionRequested) -> bool:
        return True

    def start(self, ex: ExecutionRequested, stop: Stop, record: bytes | None) -> Future[Result]:
        result: Future[Result] = Future()
        stop.on_stop(lambda: print(stop.reason))  # a closure that names its own stop
        self.stops.append(weakref.ref(stop))
        result.set_result(Result.ok())
        return result

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        raise AssertionError("started without a thread, never called")


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("lease_format", ["snapshot", "events"])
def test_a_finished_run_is_freed_without_the_collector(
    driver: Driver, no_collector: None, lease_format: str
) -> None:
    settings = KadenceSettings(
        namespace="drv", partitions=2, execution_partitions=2, lease_format=lease_format
    )
    topics: Topics = driver.provision(settings)
    target = Starting()
    worker = driver.worker(settings, {"kafka": target})
    send(driver, topics, execution())
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 1, worker)
    driver.turn(worker, times=2)
    until(lambda: bool(target.stops))
    [stop] = target.stops
    assert stop() is not None  # the timers' heap holds a finished run until it is compacted
    worker.inflight._deadlines.forget_ended(worker.inflight.alive, at_once=True)
    assert stop() is None  # then it is freed: no cycle keeps it
