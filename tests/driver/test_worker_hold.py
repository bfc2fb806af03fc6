"""What a worker holds. Runs a target starts without a thread (the Kafka topic target's produce
awaiting its ack) take none of its slots: a midnight burst claimed ahead starts at its due
instant all at once, however few the slots. What bounds them is what one lease snapshot is
sure to list; and since each transaction lists everything held, many held space them out."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

import pytest

from kadence.models import ExecutionRequested, OutcomeStatus
from kadence.settings import KadenceSettings
from kadence.targets import Result, Starts, Stop
from kadence.topics import Topics
from streams.worker import holding
from testkit.driver import START_MS, Driver
from testkit.driver.leases import snapshots
from tests.driver.test_worker_leases import due_in
from tests.driver.test_worker_loop import execution, outcomes, send

SLOTS = 2  # the tenant's cap: 1


@pytest.fixture
def settings() -> KadenceSettings:
    return KadenceSettings(
        namespace="drv", partitions=2, execution_partitions=2, worker_concurrency=SLOTS
    )


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    return driver.provision(settings)


class Produces:
    """Starts each run without a thread, as the Kafka topic target does; the runs end when
    the test settles them."""

    def __init__(self, now: Callable[[], int]) -> None:
        self.now = now
        self.started: list[tuple[str, int]] = []
        self.futures: list[Future[Result]] = []

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        raise AssertionError(f"{ex.job_id} took a pool thread")

    def can_start(self, ex: ExecutionRequested) -> bool:
        return True

    def start(self, ex: ExecutionRequested, stop: Stop, record: bytes | None) -> Future[Result]:
        future: Future[Result] = Future()
        self.futures.append(future)
        self.started.append((ex.job_id, self.now()))
        return future

    def settle(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(Result.ok())


def listed(topics: Topics, driver: Driver) -> list[int]:
    """Runs listed by each lease snapshot written, in order."""
    return [sum(r.count for r in s.held) for s in snapshots(driver.cluster, topics)]


def test_a_burst_claimed_ahead_starts_at_its_due_instant_all_at_once_with_two_slots(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    target = Produces(driver.now_ms)
    assert isinstance(target, Starts)
    worker = driver.worker(settings, {"kafka": target})
    jobs = [f"j{i}" for i in range(8)]
    for job in jobs:
        send(driver, topics, due_in(job, 1_000))
    driver.turn(worker)
    assert listed(topics, driver) == [8]  # all claimed ahead in one snapshot
    driver.advance(999)
    driver.turn(worker)
    assert target.started == []  # never early
    driver.advance(1)
    driver.turn(worker)
    assert sorted(target.started) == [(job, START_MS + 1_000) for job in jobs]
    assert listed(topics, driver) == [8]  # started from memory: no commit in between
    assert worker.inflight.running == 0  # no slot taken
    target.settle()
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 8, worker)
    assert set(outcomes(driver, topics)) == {(OutcomeStatus.succeeded, 1)}


def test_a_worker_holds_no_more_runs_than_one_snapshot_is_sure_to_list(
    driver: Driver, settings: KadenceSettings, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots of 5 ranges at most: 12 runs due at once on consecutive offsets, so 9 held (1
    range + 9 runs <= 2 x 5: however they end, what is left fits in 5 ranges)."""
    monkeypatch.setattr(holding, "MAX_HELD_RANGES", 5)
    target = Produces(driver.now_ms)
    worker = driver.worker(settings, {"kafka": target})
    for i in range(12):
        send(driver, topics, execution(f"j{i}"))  # all due now, partition 0
    driver.turn(worker)
    assert len(target.started) == 9  # claimed and started, with two slots and a cap of one
    driver.turn(worker, times=3)
    assert len(target.started) == 9  # no room until some end
    target.settle()
    driver.turn_until(lambda: len(target.started) == 12, worker)
    target.settle()
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 12, worker)
    assert max(listed(topics, driver)) == 9
    assert listed(topics, driver)[-1] == 0


def test_with_many_runs_held_transactions_are_spaced_and_claims_ahead_still_start_on_time(
    driver: Driver, settings: KadenceSettings, topics: Topics, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(holding, "PACE_FREE_RUNS", 1)
    monkeypatch.setattr(holding, "PACE_US_PER_RUN", 100_000)  # 0.1 s per run held beyond 1
    target = Produces(driver.now_ms)
    worker = driver.worker(settings, {"kafka": target})
    clock = [100.0]
    worker.holdings.monotonic = lambda: clock[0]
    for job in ("a", "b", "c"):
        send(driver, topics, due_in(job, 1_000))
    driver.turn(worker)
    assert listed(topics, driver) == [3]  # claimed ahead: the next transaction 0.2 s later
    driver.advance(1_000)
    driver.turn(worker)
    assert len(target.started) == 3  # from memory, while transactions wait
    target.settle()
    driver.turn(worker, times=3)
    assert outcomes(driver, topics) == []  # the outcomes wait for the pace
    clock[0] += 0.199
    driver.turn(worker)
    assert outcomes(driver, topics) == []
    clock[0] += 0.001
    driver.turn(worker)
    assert outcomes(driver, topics) == [(OutcomeStatus.succeeded, 1)] * 3
    assert listed(topics, driver) == [3, 0]
