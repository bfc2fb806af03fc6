"""The worker loop (streams/worker/loop.py) on the in-memory cluster: claims, renewals,
self-fencing and outcomes, each a transaction that commits or leaves nothing behind.

Invocations run on the worker's threads; the clock the leases are measured with is the
driver's, which moves only when a test advances it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from kadence.clock import ms_to_datetime
from kadence.models import (
    ExecutionOutcome,
    ExecutionRequested,
    KafkaTarget,
    LeaseEventKind,
    OutcomeStatus,
)
from kadence.settings import KadenceSettings
from kadence.targets import Result, Stop
from kadence.topics import OUTCOMES, Topics
from streams.worker.loop import Worker
from testkit.driver import START_MS, Driver, abort_error, retriable_error
from testkit.driver.leases import lease_facts, snapshots

TTL_MS = 3_000
GROUP = "drv.workers"


class Gate:
    """A target that runs until the test lets it finish, or the worker stops it (unless it is
    stubborn: then it ignores the stop, as a target blocked in I/O may)."""

    def __init__(self, *, stubborn: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.finish = threading.Event()
        self.stubborn = stubborn
        self.on_call: Callable[[ExecutionRequested], None] = lambda _ex: None

    def __call__(self, ex: ExecutionRequested, stop: Stop, deadline: float) -> Result:
        self.calls.append((ex.execution_id, ex.delivery))
        self.on_call(ex)
        while not self.finish.wait(0.002):
            if stop.is_set() and not self.stubborn:
                return Result(stop.reason or OutcomeStatus.cancelled)
        return Result.ok()


@pytest.fixture(params=["snapshot", "events"])
def settings(request: pytest.FixtureRequest) -> KadenceSettings:
    """Every test here runs with both lease formats (what they write is read as events)."""
    return KadenceSettings(
        namespace="drv", partitions=2, execution_partitions=2, lease_format=request.param
    )


@pytest.fixture
def topics(driver: Driver, settings: KadenceSettings) -> Topics:
    return driver.provision(settings)


def execution(job: str = "j1", *, delivery: int = 1) -> ExecutionRequested:
    due = ms_to_datetime(START_MS)
    return ExecutionRequested(
        execution_id=f"acme/{job}@2026-12-01T08:00:00.000Z",
        tenant="acme",
        job_id=job,
        definition_version=1,
        nominal_at=due,
        due_at=due,
        dispatched_at=due - timedelta(seconds=1),
        target=KafkaTarget(topic="t"),
        timeout_ms=600_000,
        lease_ttl_ms=TTL_MS,
        delivery=delivery,
    )


def send(driver: Driver, topics: Topics, ex: ExecutionRequested, partition: int = 0) -> None:
    driver.send(topics.executions, ex, key=ex.routing_key, partition=partition)


def leases(driver: Driver, topics: Topics) -> list[tuple[LeaseEventKind, int]]:
    """(kind, delivery) of each lease event, or of what the snapshots stand for."""
    return [(kind, delivery) for kind, _, delivery in lease_facts(driver.cluster, topics)]


def outcomes(driver: Driver, topics: Topics) -> list[tuple[OutcomeStatus, int]]:
    found = driver.records(topics.outcomes, OUTCOMES)
    return [(o.status, o.delivery) for o in found if isinstance(o, ExecutionOutcome)]


def until(done: Callable[[], bool], wait_s: float = 5.0) -> None:
    """Wait (real time) for an invocation thread; the driver's clock does not move."""
    deadline = time.monotonic() + wait_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not done: {done}")
        time.sleep(0.001)


def finished(worker: Worker) -> bool:
    return all(r.future is not None and r.future.done() for r in worker.runs.values())


def test_a_claim_commits_before_the_run_starts(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    gate = Gate()
    visible_at_start: list[list[tuple[LeaseEventKind, int]]] = []
    gate.on_call = lambda _ex: visible_at_start.append(leases(driver, topics))
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    until(lambda: bool(visible_at_start))
    assert visible_at_start == [[(LeaseEventKind.acquired, 1)]]
    assert driver.cluster.committed(GROUP)[(topics.executions, 0)] == 1
    gate.finish.set()


def test_a_claim_that_does_not_commit_does_not_run_until_it_does(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    gate = Gate()
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.cluster.faults.fail("commit_transaction", abort_error())
    driver.turn(worker)
    assert worker.runs == {}
    assert leases(driver, topics) == []
    driver.turn(worker)
    until(lambda: bool(gate.calls))
    assert gate.calls == [("acme/j1@2026-12-01T08:00:00.000Z", 1)]
    assert leases(driver, topics) == [(LeaseEventKind.acquired, 1)]
    gate.finish.set()


def test_a_claim_fenced_by_a_rebalance_never_runs_and_the_new_owner_runs_it_once(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """The zombie case: the group moves w1's partition on while w1 is committing its claim;
    its offsets carry the old generation, the claim is refused, and only w2 runs it."""
    gate1, gate2 = Gate(), Gate()
    w1 = driver.worker(settings, {"kafka": gate1}, instance_id="w1")
    w2 = driver.worker(settings, {"kafka": gate2}, instance_id="w2")
    driver.turn(w1, w2)
    assert [tp.partition for tp in w1.consumer.assignment()] == [0]
    driver.cluster.faults.on(
        "send_offsets_to_transaction",
        lambda: driver.cluster.kick(GROUP, w1.worker_id),
        client=w1.worker_id,
    )
    send(driver, topics, execution(), partition=0)
    driver.turn(w1)
    assert w1.runs == {}
    assert leases(driver, topics) == []
    driver.turn(w2)
    until(lambda: bool(gate2.calls))
    driver.turn(w1, w2, times=3)  # w1 joins again and gets partition 0 back
    assert gate1.calls == []
    assert leases(driver, topics) == [(LeaseEventKind.acquired, 1)]
    gate2.finish.set()


def test_renewals_every_third_of_the_lease_then_outcome_and_release(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    gate = Gate()
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    driver.advance(TTL_MS // 3 - 1)
    driver.turn(worker)
    assert leases(driver, topics) == [(LeaseEventKind.acquired, 1)]
    for _ in range(4):  # a run four renewals long: longer than the lease
        driver.advance(TTL_MS // 3)
        driver.turn(worker)
    assert [kind for kind, _ in leases(driver, topics)].count(LeaseEventKind.renewed) == 4
    [run] = worker.runs.values()
    assert run.lease_expires_ms == driver.now_ms() + TTL_MS
    gate.finish.set()
    until(lambda: finished(worker))
    driver.turn(worker)
    assert leases(driver, topics)[-1] == (LeaseEventKind.released, 1)
    assert outcomes(driver, topics) == [(OutcomeStatus.succeeded, 1)]
    assert worker.runs == {}


def test_a_run_whose_renewals_do_not_commit_stops_itself_and_reports_lease_lost(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    gate = Gate()
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    driver.cluster.faults.fail("commit_transaction", abort_error(), times=2)
    for _ in range(3):
        driver.advance(TTL_MS // 3)
        driver.turn(worker)  # two renewals aborted; the third turn is at the lease's expiry
    [run] = worker.runs.values()
    assert run.lease_lost
    assert run.stop.reason is OutcomeStatus.lease_lost
    until(lambda: finished(worker))
    driver.turn(worker)
    assert outcomes(driver, topics) == [(OutcomeStatus.lease_lost, 1)]
    assert worker.metrics.lease_lost._value.get() == 1
    if settings.lease_format == "events":
        assert leases(driver, topics) == [(LeaseEventKind.acquired, 1)]  # never released
        return
    # never released either: the snapshot that leaves it out comes after its lease ran out,
    # which is no release (the reaper redelivers it)
    claim, after = snapshots(driver.cluster, topics)
    assert [(r.start, r.count) for r in claim.held] == [(0, 1)]
    assert after.held == []
    assert after.at >= claim.at + timedelta(milliseconds=TTL_MS)


def test_a_lease_that_expires_during_a_broker_outage_self_fences_while_the_commit_retries(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    gate = Gate()
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    driver.advance(TTL_MS // 3)
    faults = driver.cluster.faults
    faults.fail("commit_transaction", retriable_error(), times=5)
    faults.on("commit_transaction", lambda: driver.advance(1_000), times=5)
    driver.turn(worker)  # the renewal's commit is retried for 5 s of the driver's time
    [run] = worker.runs.values()
    assert run.lease_lost  # stopped between two attempts, not after the outage
    until(lambda: finished(worker))
    driver.turn(worker)
    assert outcomes(driver, topics) == [(OutcomeStatus.lease_lost, 1)]


def test_the_outcome_and_the_release_share_one_transaction(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    gate = Gate()
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    gate.finish.set()
    until(lambda: finished(worker))
    in_the_transaction: list[set[str]] = []

    def look() -> None:
        txn = driver.cluster.transactions[worker.worker_id]
        in_the_transaction.append({topic for topic, _ in txn.partitions})

    driver.cluster.faults.on("commit_transaction", look, times=2)
    driver.cluster.faults.fail("commit_transaction", abort_error())
    driver.turn(worker)
    assert outcomes(driver, topics) == []
    assert leases(driver, topics) == [(LeaseEventKind.acquired, 1)]  # neither, not one
    driver.turn(worker)
    assert in_the_transaction == [{topics.outcomes, topics.leases}] * 2
    assert outcomes(driver, topics) == [(OutcomeStatus.succeeded, 1)]
    assert leases(driver, topics) == [(LeaseEventKind.acquired, 1), (LeaseEventKind.released, 1)]


def test_a_redelivery_to_the_worker_whose_lease_ran_out_is_run_after_its_own_run(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """Delivery 1 loses its lease but its target goes on; the reaper's delivery 2 comes back
    to the same worker. It waits for delivery 1 to end and be reported, then runs."""
    gate = Gate(stubborn=True)
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    driver.cluster.faults.fail("commit_transaction", abort_error(), times=2)
    for _ in range(3):
        driver.advance(TTL_MS // 3)
        driver.turn(worker)
    send(driver, topics, execution(delivery=2))
    driver.turn(worker, times=3)
    assert len(gate.calls) == 1  # delivery 2 waits while delivery 1 still runs
    gate.finish.set()
    driver.turn_until(lambda: len(gate.calls) == 2, worker)
    driver.turn_until(lambda: len(outcomes(driver, topics)) == 2, worker)
    assert [d for _, d in gate.calls] == [1, 2]
    assert sorted(outcomes(driver, topics), key=lambda o: o[1]) == [
        (OutcomeStatus.lease_lost, 1),
        (OutcomeStatus.succeeded, 2),
    ]


def test_an_outcome_says_when_the_target_ended_not_when_the_outcome_was_written(
    driver: Driver, settings: KadenceSettings, topics: Topics
) -> None:
    """A run that ended at +500 ms and whose outcome committed at +900 ms finished at +500."""
    gate = Gate()
    worker = driver.worker(settings, {"kafka": gate})
    send(driver, topics, execution())
    driver.turn(worker)
    until(lambda: bool(gate.calls))
    driver.advance(500)
    gate.finish.set()
    until(lambda: finished(worker))
    driver.advance(400)
    driver.turn(worker)
    [outcome] = [
        o for o in driver.records(topics.outcomes, OUTCOMES) if isinstance(o, ExecutionOutcome)
    ]
    assert outcome.started_at == ms_to_datetime(START_MS)
    assert outcome.finished_at == ms_to_datetime(START_MS + 500)
